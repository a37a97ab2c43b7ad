#pragma once
// Where a subscription loop's ownership of its stream comes from (DESIGN.md: "the runtime does
// not know where ownership comes from"). A plain subscription owns what its consumer reads in
// its group (runtime/plain_ownership.h); one shard of a sharded subscription owns the shard
// under this member's grant, behind its fence (sharding/shard_ownership.h), and is handed to the
// loop from above in SubscriptionDeps. The loop asks it for its steps and its entry source and
// for the few things that differ; it never asks which kind it has.
//
// Threads: made on any thread before the loop starts, then used on the loop thread only. The
// loop holds it for its whole life.

#include <memory>
#include <optional>
#include <string>

#include "sidecar/admin/metrics.h"
#include "sidecar/common/event_loop.h"
#include "sidecar/config/config.h"
#include "sidecar/delivery/encoder.h"
#include "sidecar/redis/async_connection.h"
#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/entry_ledger.h"
#include "sidecar/runtime/entry_source.h"
#include "sidecar/runtime/intake.h"

namespace streamcar::runtime {

class ConsumerReaper;

// The loop's parts an entry source is built from. Everything outlives the source.
struct SourceParts {
  EventLoop& loop;
  const config::Subscription& sub;
  const redis::SubscriptionOps& ops;  // made by the same Ownership's MakeOps
  redis::AsyncConnection* read;       // the source's own: it sets OnReady and OnFatal
  redis::AsyncConnection* command;    // the owner's, shared with the settlement
  EntryLedger* ledger;
  Intake* router;
  admin::SubscriptionMetrics* metrics;  // may be null
  EntrySource::Callbacks callbacks;
  ConsumerReaper* reaper = nullptr;  // consumer.reap_idle (SPEC 4.6); null: no reaping
};

class Ownership {
 public:
  virtual ~Ownership() = default;

  // The subscription's Redis steps (redis/stream_ops.h), as consumer `consumer`.
  virtual std::unique_ptr<redis::SubscriptionOps> MakeOps(const config::Subscription& sub,
                                                          const std::string& consumer) const = 0;
  // The loop's entry source, reading with `parts.ops` (what MakeOps made).
  virtual std::unique_ptr<EntrySource> MakeSource(SourceParts parts) const = 0;

  // Appended to the subscription's name in the loop's watchdog name ("" or "/shard-3"): two
  // loops of one process never share a name.
  virtual std::string LoopNameSuffix() const = 0;
  // Without ordering.key_field, every entry goes in one lane: one request in flight at a time
  // (a shard, SHARDING.md B8).
  virtual bool OneLaneWithoutKeyField() const = 0;
  // consumer.reap_idle may reap this loop's group's idle consumers (SPEC 4.6; a shard never
  // does: its consumers are the members').
  virtual bool MayReapConsumers() const = 0;
  // The loop reports its last settlement and pending count (SubscriptionLoop::progress(): a
  // shard's member sends them in its heartbeats, SHARDING.md C2).
  virtual bool ReportsProgress() const = 0;
  // What each request carries to say whose it is (a shard: Streamcar-Shard and
  // Streamcar-Fence); none for a plain subscription.
  virtual std::optional<delivery::ShardStamp> RequestStamp() const = 0;

  // A step was refused because another holds the stream now (SubscriptionOps::RefusedOwnership
  // said so, naming `installed`), the step being `op`. The loop has stopped reading, delivering
  // and settling; this tells whoever granted the ownership. Once, on the loop thread.
  virtual void Lost(int64_t installed, std::string_view op) const = 0;
};

}  // namespace streamcar::runtime
