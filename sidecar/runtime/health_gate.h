#pragma once
// The handler's health check (handler.health_url, SPEC 3.1) as a gate: closed from the start
// until the first check passes, and again while checks fail; reading waits with it. The health
// probe (health_probe.h) gives the verdicts and kicks the loop when one changes.
//
// Loop thread only.

#include "sidecar/runtime/delivery_gate.h"

namespace streamcar::runtime {

class HealthGate final : public DeliveryGate {
 public:
  std::string_view name() const override { return "health"; }
  GateState StateAt(SteadyTime /*now*/) const override {
    if (healthy_) return GateState::Open();
    return GateState::ClosedUntil(std::nullopt, GateState::Reads::kWaitWhileClosed);
  }

  void SetHealthy(bool healthy) { healthy_ = healthy; }
  bool healthy() const { return healthy_; }

 private:
  bool healthy_ = false;  // nothing is delivered before the first check passes
};

}  // namespace streamcar::runtime
