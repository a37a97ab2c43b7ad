#pragma once
// Every gate of one subscription's delivery (delivery_gate.h), asked together: delivery goes on
// only while all are open, and the ledger's pause (what intake reads by) is what they say
// together.
//
// Loop thread only.

#include <memory>
#include <vector>

#include "sidecar/runtime/delivery_gate.h"
#include "sidecar/runtime/entry_ledger.h"

namespace streamcar::runtime {

class DeliveryGates {
 public:
  void Add(std::unique_ptr<DeliveryGate> gate) { gates_.push_back(std::move(gate)); }

  // Whether the pump may POST at `now`: every gate is open.
  bool Open(SteadyTime now) const;
  // Whether every gate lets the request about to leave at `now` go, taking what it claims
  // (DeliveryGate::Claim); asked after Open said yes. Only the rate limit's gate claims
  // anything, so a refusal has taken nothing from the others.
  bool Claim(SteadyTime now);
  // Tells every gate that a request leaves now.
  void OnSent(SteadyTime now);
  // Tells every gate the handler's answer to a request.
  void OnAnswer(const delivery::HandlerResponse& response, SteadyTime now);
  // Tells every gate closed at `now` that it holds back entries ready to go.
  void OnHeldBack(SteadyTime now);
  // The pause the gates say together at `now`: the latest reopening of those closed that hold
  // reads back (SteadyTime::max() when one opens only when told), and whether reading waits
  // while anything is held; and the latest of those closed that let reading go on, for delivery
  // alone.
  EntryLedger::Pause PauseAt(SteadyTime now) const;

 private:
  std::vector<std::unique_ptr<DeliveryGate>> gates_;
};

}  // namespace streamcar::runtime
