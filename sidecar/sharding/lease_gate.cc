#include "sidecar/sharding/lease_gate.h"

#include <utility>

namespace streamcar::sharding {

LeaseGate::LeaseGate(const std::atomic<int64_t>& deadline_ns, const Clock& lease_clock,
                     std::shared_ptr<const std::atomic<bool>> cut_short)
    : deadline_ns_(deadline_ns), lease_clock_(lease_clock), cut_short_(std::move(cut_short)) {}

runtime::GateState LeaseGate::StateAt(SteadyTime /*now*/) const {
  // The deadline first (acquire): a drop's cut_short, set before the rejoin that renewed it was
  // stored (release), is then seen with it. A dropped run sends nothing more, even when the
  // lease is valid again: a rejoin renews the lease before the stopper has ended this run's
  // intake and deliveries (a sharded chaos run caught a dropped run retrying under its old
  // fence right after a rejoin).
  const int64_t deadline = deadline_ns_.load(std::memory_order_acquire);
  const bool valid = !cut_short_->load(std::memory_order_relaxed) && deadline != 0 &&
                     lease_clock_.Now().time_since_epoch().count() < deadline;
  if (valid) return runtime::GateState::Open();
  return runtime::GateState::ClosedUntil(std::nullopt, runtime::GateState::Reads::kGoOn);
}

}  // namespace streamcar::sharding
