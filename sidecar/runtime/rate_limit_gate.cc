#include "sidecar/runtime/rate_limit_gate.h"

#include <algorithm>
#include <chrono>

namespace streamcar::runtime {

RateLimitGate::RateLimitGate(double max_rps, int burst, AttemptObserver* observer)
    : bucket_(max_rps, static_cast<double>(burst)), observer_(observer) {}

GateState RateLimitGate::StateAt(SteadyTime now) const {
  if (bucket_.HasToken(now)) return GateState::Open();
  return GateState::ClosedUntil(bucket_.NextTokenAt(now), GateState::Reads::kGoOn);
}

void RateLimitGate::OnHeldBack(SteadyTime now) {
  if (!held_since_) held_since_ = now;
}

void RateLimitGate::OnSent(SteadyTime now) {
  if (held_since_) {
    const SteadyTime token_came = std::min(now, bucket_.TokenCameAt(now));
    if (token_came > *held_since_) {
      observer_->OnRateLimited(std::chrono::duration<double>(token_came - *held_since_).count());
    }
    held_since_.reset();
  }
  bucket_.Take(now);
}

}  // namespace streamcar::runtime
