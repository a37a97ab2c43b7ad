#pragma once
// The consumer-name lease (consumer_lease.h, SPEC 4.7) as a delivery gate: nothing is POSTed,
// and nothing new read, unless the lease is usable now. It reopens when a renewal is confirmed,
// whose answer kicks the loop.
//
// Loop thread only.

#include "sidecar/runtime/consumer_lease.h"
#include "sidecar/runtime/delivery_gate.h"

namespace streamcar::runtime {

class ConsumerLeaseGate final : public DeliveryGate {
 public:
  explicit ConsumerLeaseGate(const ConsumerLease* lease) : lease_(lease) {}

  std::string_view name() const override { return "consumer_lease"; }
  GateState StateAt(SteadyTime now) const override {
    if (lease_->UsableAt(now)) return GateState::Open();
    return GateState::ClosedUntil(std::nullopt, GateState::Reads::kWaitWhileClosed);
  }

 private:
  const ConsumerLease* lease_;  // outlives the gate
};

}  // namespace streamcar::runtime
