#pragma once
// The member's local lease as a delivery gate (SHARDING.md B6): a shard's loop sends nothing once
// the lease its member last renewed has run out by the member's own clock. Asked before each
// POST, it shrinks the window in which a paused member could send what a newer owner also
// handles. Reading goes on: a fenced read is refused by the fence itself once the shard moved.
//
// The member thread renews the lease (the deadline, an atomic) and may cut a run short; the
// shard's loop thread asks. No callback: the member's next grant or drop kicks the loop, and
// entries wait queued meanwhile.

#include <atomic>
#include <cstdint>
#include <memory>

#include "sidecar/common/clock.h"
#include "sidecar/runtime/delivery_gate.h"

namespace streamcar::sharding {

class LeaseGate final : public runtime::DeliveryGate {
 public:
  // `deadline_ns`: the lease's end on `lease_clock` (nanoseconds since its epoch; 0: no lease),
  // stored by the member with release order. `cut_short`: set when the member dropped this run,
  // which then sends nothing more even once a rejoin renews the lease. All outlive the gate.
  LeaseGate(const std::atomic<int64_t>& deadline_ns, const Clock& lease_clock,
            std::shared_ptr<const std::atomic<bool>> cut_short);

  std::string_view name() const override { return "lease"; }
  // Closed until the member says otherwise: its lease is not the loop clock's to predict.
  runtime::GateState StateAt(SteadyTime now) const override;

 private:
  const std::atomic<int64_t>& deadline_ns_;
  const Clock& lease_clock_;
  const std::shared_ptr<const std::atomic<bool>> cut_short_;
};

}  // namespace streamcar::sharding
