#pragma once
// The delivery half of one subscription: takes what the ledger has ready, encodes it (SPEC 3.1,
// 3.4), hands it to the handler client, turns the answer into outcomes (delivery/outcome.h) and
// applies them: a 2xx to the ledger and the settlement's acknowledgements, a retry to the
// ledger's timers, a dead letter to the settlement. A refused connection hands the entries back
// without spending an attempt (SPEC 3.2). Before each POST it asks the delivery gates
// (delivery_gates.h: the refused-connect pause, the health check, a shard's lease), tells them
// every answer, and keeps the ledger's pause what they say. It reports each attempt to the
// subscription's observers (attempt_observer.h): the metrics are theirs.
//
// Routes (SPEC 11, delivery/routes.h) are applied here, to each hand-out before it is encoded:
// entries a `drop: true` route matches are acknowledged without a delivery, and the others go
// to their route's target, one request per target (a batch never mixes targets). Requests that
// find no free connection go back to the front of the queue, never posted; in a shard's single
// lane only the leading run with one fate goes out and the rest waits behind it.
//
// Single-threaded: the subscription's loop thread makes every call, and the handler client calls
// back on it. Nothing here keeps a pointer into the ledger across a request: an EntryRef names
// each entry, and a ref gone stale meanwhile (a lost lease let go) is skipped.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/config/config.h"
#include "sidecar/delivery/encoder.h"
#include "sidecar/delivery/handler_client.h"
#include "sidecar/delivery/outcome.h"
#include "sidecar/delivery/routes.h"
#include "sidecar/runtime/attempt_observer.h"
#include "sidecar/runtime/delivery_gates.h"
#include "sidecar/runtime/entry_ledger.h"
#include "sidecar/runtime/settlement.h"

namespace streamcar::runtime {

class DeliveryPump {
 public:
  // Every pointer outlives the pump. `after_results` runs after the outcomes of an answer (or a
  // refusal) were applied: the loop flushes the settlement and lets intake read again.
  DeliveryPump(const config::Subscription& subscription, EntryLedger* ledger,
               Settlement* settlement, delivery::HandlerClient* client, DeliveryGates* gates,
               AttemptObserver* observer, const Clock& clock, std::function<void()> after_results);

  // Sends what the ledger has ready while the client has a free connection and every gate is
  // open. Updates the ledger's pause first.
  void Pump();
  // The ledger's pause from what the gates say now: for intake, which reads by it. Pump does it;
  // the loop also does it once before intake starts.
  void UpdatePause();

  // One shard of a sharded subscription (SPEC 9): requests carry `stamp` (Streamcar-Shard,
  // Streamcar-Fence). The member's lease is one of the gates (sharding/lease_gate.h).
  void ShardedBy(delivery::ShardStamp stamp);

 private:
  // Sends one hand-out (`slots` > 0 connections free): the number of requests it made.
  size_t Send(std::vector<EntryRef> refs, size_t slots);
  size_t SendRouted(std::vector<EntryRef> refs, size_t slots);
  // One request to handler target `target` (delivery/routes.h); `routes`: each entry's route,
  // with routes (empty without).
  void SendRequest(std::vector<EntryRef> refs, size_t target, std::vector<int> routes = {});
  void OnAnswer(const std::vector<EntryRef>& refs, const std::vector<int>& routes,
                SteadyTime started, const delivery::HandlerResponse& response);
  void Settle(const EntryRef& ref, const delivery::Decision& decision);
  // One lane (a shard without key_field): the batch's entries up to its first failure are
  // settled, that failure too, and the rest delivered again after it. A request that failed as
  // a whole (`failed_whole`: a non-2xx, a timeout) with more than one entry charges none: each is
  // delivered again alone.
  void SettleInOrder(const std::vector<EntryRef>& refs,
                     const std::vector<delivery::Decision>& decisions, bool failed_whole);
  void HandlerRefused(const std::vector<EntryRef>& refs);

  const config::Subscription& sub_;
  EntryLedger* ledger_;
  Settlement* settlement_;
  delivery::HandlerClient* client_;
  DeliveryGates* gates_;
  AttemptObserver* observer_;
  const Clock& clock_;
  std::function<void()> after_results_;
  const delivery::OutcomePolicy policy_;
  delivery::EncodeContext context_;
  const size_t batch_size_;
  const delivery::RouteTable routes_;
};

}  // namespace streamcar::runtime
