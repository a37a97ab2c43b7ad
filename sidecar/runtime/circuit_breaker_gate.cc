#include "sidecar/runtime/circuit_breaker_gate.h"

#include <utility>

#include "sidecar/common/duration.h"
#include "sidecar/common/log.h"

namespace streamcar::runtime {

CircuitBreakerGate::CircuitBreakerGate(std::string subscription,
                                       const config::CircuitBreakerConfig& config,
                                       delivery::OutcomePolicy policy, AttemptObserver* observer)
    : subscription_(std::move(subscription)),
      failures_(config.failures),
      open_for_(config.open_for),
      policy_(std::move(policy)),
      observer_(observer) {}

GateState CircuitBreakerGate::StateAt(SteadyTime now) const {
  if (state_ == CircuitState::kClosed) return GateState::Open();
  if (now < open_until_) {
    return GateState::ClosedUntil(open_until_, GateState::Reads::kWaitWhileHeld);
  }
  // Half-open: one request may go; reading waits while anything is held, as the held entries
  // are what probes the handler (with nothing held, a read brings the probe).
  if (probe_out_) return GateState::ClosedUntil(std::nullopt, GateState::Reads::kWaitWhileHeld);
  return {true, std::nullopt, GateState::Reads::kWaitWhileHeld};
}

void CircuitBreakerGate::OnSent(SteadyTime now) {
  if (state_ == CircuitState::kClosed || now < open_until_ || probe_out_) return;
  probe_out_ = true;
  Report(CircuitState::kHalfOpen);
  LogInfo("circuit breaker half-open: one request probes the handler",
          {{"subscription", subscription_}});
}

CircuitBreakerGate::Verdict CircuitBreakerGate::Judge(
    const delivery::HandlerResponse& response) const {
  // The outcome does not depend on the attempt count or the jitter, only on the answer.
  switch (delivery::Decide(policy_, response, 1, 0, 0.5).outcome) {
    case delivery::DeliveryOutcome::kSuccess:
    case delivery::DeliveryOutcome::kReject:
      return Verdict::kSuccess;
    case delivery::DeliveryOutcome::kRetry:
    case delivery::DeliveryOutcome::kTimeout:
    case delivery::DeliveryOutcome::kError:
      return Verdict::kFailure;
    case delivery::DeliveryOutcome::kNone:
      break;
  }
  return Verdict::kNeither;
}

void CircuitBreakerGate::OnAnswer(const delivery::HandlerResponse& response, SteadyTime now) {
  const Verdict verdict = Judge(response);
  if (verdict == Verdict::kNeither) {
    // Refused: not an attempt. A refused probe reached nothing; the next request probes.
    probe_out_ = false;
    return;
  }
  if (state_ == CircuitState::kClosed) {
    if (verdict == Verdict::kSuccess) {
      streak_ = 0;
      return;
    }
    if (++streak_ >= failures_) Open(now, "retry outcomes in a row");
    return;
  }
  if (now < open_until_) return;  // open: answers to requests sent before it opened
  if (verdict == Verdict::kSuccess) {
    Close();
  } else {
    Open(now, "a request failed while half-open");
  }
}

void CircuitBreakerGate::Open(SteadyTime now, std::string_view why) {
  open_until_ = now + open_for_;
  probe_out_ = false;
  streak_ = 0;
  Report(CircuitState::kOpen);
  LogWarn("circuit breaker open: no deliveries, no attempts spent",
          {{"subscription", subscription_},
           {"why", std::string(why)},
           {"failures", static_cast<int64_t>(failures_)},
           {"open_for", FormatDuration(open_for_)}});
}

void CircuitBreakerGate::Close() {
  probe_out_ = false;
  streak_ = 0;
  Report(CircuitState::kClosed);
  LogInfo("circuit breaker closed: the handler answered; delivery goes on",
          {{"subscription", subscription_}});
}

void CircuitBreakerGate::Report(CircuitState state) {
  state_ = state;
  observer_->OnCircuitState(state);
}

}  // namespace streamcar::runtime
