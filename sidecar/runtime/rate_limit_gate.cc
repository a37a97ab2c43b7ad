#include "sidecar/runtime/rate_limit_gate.h"

#include <chrono>
#include <utility>

namespace streamcar::runtime {

RateLimitGate::RateLimitGate(double max_rps, int burst, AttemptObserver* observer)
    : RateLimitGate(std::make_shared<SharedTokenBucket>(max_rps, static_cast<double>(burst)),
                    observer) {}

RateLimitGate::RateLimitGate(std::shared_ptr<SharedTokenBucket> bucket, AttemptObserver* observer)
    : bucket_(std::move(bucket)), observer_(observer) {}

GateState RateLimitGate::StateAt(SteadyTime now) const {
  const SteadyTime next = bucket_->NextTokenAt(now);
  if (next <= now) return GateState::Open();
  return GateState::ClosedUntil(next, GateState::Reads::kGoOn);
}

void RateLimitGate::OnHeldBack(SteadyTime now) {
  if (!held_since_) held_since_ = now;
}

bool RateLimitGate::Claim(SteadyTime now) {
  const std::optional<SteadyTime> came = bucket_->TryTake(now);
  // None: another loop took the token since StateAt; the gate is closed until the next one.
  if (!came) return false;
  Waited(*came);
  claimed_ = true;
  return true;
}

void RateLimitGate::OnSent(SteadyTime now) {
  if (claimed_) {
    claimed_ = false;
    return;
  }
  // A request no Claim preceded takes its token all the same, in debt if none is there, so the
  // rate holds whatever the caller. None does today: the pump claims before each request, a
  // routed hand-out's further ones included (delivery_pump.cc).
  Waited(bucket_->Take(now));
}

void RateLimitGate::Waited(SteadyTime came) {
  if (!held_since_) return;
  if (came > *held_since_) {
    observer_->OnRateLimited(std::chrono::duration<double>(came - *held_since_).count());
  }
  held_since_.reset();
}

}  // namespace streamcar::runtime
