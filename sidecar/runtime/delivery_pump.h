#pragma once
// The delivery half of one subscription: takes what the ledger has ready, encodes it (SPEC 3.1,
// 3.4), hands it to the handler client, turns the answer into outcomes (delivery/outcome.h) and
// applies them: a 2xx to the ledger and the settlement's acknowledgements, a retry to the
// ledger's timers, a dead letter to the settlement. A refused connection hands the entries back
// without spending an attempt and pauses delivery (SPEC 3.2).
//
// Single-threaded: the subscription's loop thread makes every call, and the handler client calls
// back on it. Nothing here keeps a pointer into the ledger across a request: an EntryRef names
// each entry, and a ref gone stale meanwhile (a lost lease let go) is skipped.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "sidecar/admin/metrics.h"
#include "sidecar/common/clock.h"
#include "sidecar/config/config.h"
#include "sidecar/delivery/encoder.h"
#include "sidecar/delivery/handler_client.h"
#include "sidecar/delivery/outcome.h"
#include "sidecar/runtime/entry_ledger.h"
#include "sidecar/runtime/settlement.h"

namespace streamcar::runtime {

class DeliveryPump {
 public:
  // Every pointer outlives the pump. `after_results` runs after the outcomes of an answer (or a
  // refusal) were applied: the loop flushes the settlement and lets intake read again.
  DeliveryPump(const config::Subscription& subscription, EntryLedger* ledger,
               Settlement* settlement, delivery::HandlerClient* client,
               admin::SubscriptionMetrics* metrics, const Clock& clock,
               std::function<void()> after_results);

  // Sends what the ledger has ready while the client has a free connection.
  void Pump();

  // One shard of a sharded subscription (SPEC 9): requests carry `stamp` (Streamcar-Shard,
  // Streamcar-Fence), and nothing is sent while `lease_valid` says the member's local lease ran
  // out (SHARDING.md B6: checked before each POST, it shrinks the window in which a paused member
  // could send what a newer owner also handles).
  void ShardedBy(delivery::ShardStamp stamp, std::function<bool()> lease_valid);

 private:
  void Send(std::vector<EntryRef> refs);
  void OnAnswer(const std::vector<EntryRef>& refs, SteadyTime started,
                const delivery::HandlerResponse& response);
  void Settle(const EntryRef& ref, const delivery::Decision& decision);
  // One lane (a shard without key_field): the batch's entries up to its first failure are
  // settled, that failure too, and the rest delivered again after it. A request that failed as
  // a whole (`failed_whole`: a non-2xx, a timeout) with more than one entry charges none: each is
  // delivered again alone.
  void SettleInOrder(const std::vector<EntryRef>& refs,
                     const std::vector<delivery::Decision>& decisions, bool failed_whole);
  void Count(const delivery::Decision& decision);
  void HandlerRefused(const std::vector<EntryRef>& refs, const std::string& error);
  void HandlerAnswered();

  const config::Subscription& sub_;
  EntryLedger* ledger_;
  Settlement* settlement_;
  delivery::HandlerClient* client_;
  admin::SubscriptionMetrics* metrics_;
  const Clock& clock_;
  std::function<void()> after_results_;
  const delivery::OutcomePolicy policy_;
  delivery::EncodeContext context_;
  std::function<bool()> lease_valid_;  // sharded only
  const size_t batch_size_;
  int refused_streak_ = 0;
};

}  // namespace streamcar::runtime
