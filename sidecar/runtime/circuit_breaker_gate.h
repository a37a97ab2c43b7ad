#pragma once
// The circuit breaker (circuit_breaker, SPEC 11) as a delivery gate. `failures` retry outcomes
// in a row (SPEC 3.2: a status that is neither 2xx nor a reject status, a 2xx saying RETRY, a
// timeout, a reset after the request was sent) open it: for `open_for` nothing is sent, and
// entries wait as when the handler refuses connections (refused_connect_gate.h): queued, their
// leases kept alive, no attempt spent, reading held back while anything is held. Then it is
// half-open: exactly one request, the probe, goes out; its success closes the breaker, its
// failure opens it for another `open_for`.
//
// What counts:
// - A success is a 2xx that is not a RETRY, and a reject (a reject status, DROP): the handler
//   answered and judged the entry; it was up. A batch's 2xx is a success whatever its
//   `failures` list says about single entries.
// - A refused connection counts neither way: it is not an attempt (SPEC 3.2) and has its own
//   gate, which pauses delivery already. A refused probe leaves the breaker half-open for the
//   next request to probe.
// - While open, answers are ignored: they answer requests sent before it opened. Once half-open,
//   the first answer that arrives decides, the probe's or a late one's: either tells how the
//   handler is doing now.
// The probe is a real delivery, so its failure spends its entry's attempt: an outage spends one
// attempt per `open_for` in all, not every entry's attempts.
//
// Transitions are logged and reported to the observer (streamcar_circuit_state).
//
// Loop thread only; time comes from the pump's `now`.

#include <string>

#include "sidecar/config/config.h"
#include "sidecar/delivery/outcome.h"
#include "sidecar/runtime/attempt_observer.h"
#include "sidecar/runtime/delivery_gate.h"

namespace streamcar::runtime {

class CircuitBreakerGate final : public DeliveryGate {
 public:
  // `config.failures` > 0. `policy` says which statuses are rejects. `subscription` names it in
  // the logs; `observer` outlives the gate.
  CircuitBreakerGate(std::string subscription, const config::CircuitBreakerConfig& config,
                     delivery::OutcomePolicy policy, AttemptObserver* observer);

  std::string_view name() const override { return "circuit_breaker"; }
  GateState StateAt(SteadyTime now) const override;
  void OnSent(SteadyTime now) override;
  void OnAnswer(const delivery::HandlerResponse& response, SteadyTime now) override;

  // The state the metric shows: open until the probe leaves, half-open while it is out.
  CircuitState state() const { return state_; }

 private:
  enum class Verdict { kSuccess, kFailure, kNeither };
  Verdict Judge(const delivery::HandlerResponse& response) const;
  void Open(SteadyTime now, std::string_view why);
  void Close();
  void Report(CircuitState state);

  const std::string subscription_;
  const int failures_;
  const Millis open_for_;
  const delivery::OutcomePolicy policy_;
  AttemptObserver* observer_;

  CircuitState state_ = CircuitState::kClosed;
  int streak_ = 0;           // closed: retry outcomes in a row
  SteadyTime open_until_{};  // open: no request before this
  bool probe_out_ = false;   // half-open: the one request is out
};

}  // namespace streamcar::runtime
