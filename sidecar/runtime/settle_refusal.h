#pragma once
// Which step of a settlement batch the stream's owner refused because another holds the stream
// now (SubscriptionOps::RefusedOwnership: a shard's fence), and what the refusal named. The
// loop then stops as Ownership::Lost says; the ops, not the loop, know what a refusal looks like.

#include <cstdint>
#include <optional>
#include <string_view>

#include "sidecar/redis/async_connection.h"
#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/settle_batch.h"

namespace streamcar::runtime {

struct RefusedStep {
  int64_t installed = 0;  // what the refusal named (a shard: the token installed)
  // The step refused, as streamcar_fenced_ops_total labels it (SHARDING.md C1): ack,
  // dead_letter, retry, claim (the lease of claimed entries) or read (a read taken back).
  std::string_view op;
};

// The first refused step of `plan`'s replies in `result`, sent with `ops`; nullopt when none.
std::optional<RefusedStep> RefusedIn(const redis::SubscriptionOps& ops, const SettlePlan& plan,
                                     const redis::BatchResult& result);

}  // namespace streamcar::runtime
