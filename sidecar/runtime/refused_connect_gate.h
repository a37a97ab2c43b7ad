#pragma once
// The handler refused the connection (SPEC 3.2): no attempt was spent, and delivery pauses for a
// backoff that grows with each refusal in a row (100 ms, doubling to 2 s, jittered). Reading
// waits with it, and after it while anything is held: the entries held are what tries the handler
// again. Any answer (a status, a timeout, a broken exchange: the handler was reached) lifts the
// pause at once.
//
// Loop thread only; time comes from the answers' `now`.

#include <string>

#include "sidecar/common/backoff.h"
#include "sidecar/runtime/delivery_gate.h"

namespace streamcar::runtime {

class RefusedConnectGate final : public DeliveryGate {
 public:
  // The first pause and the longest: a refusing handler is tried again soon, and at least every
  // two seconds (shorter than the reconnect backoff to Redis: the handler is usually local).
  static constexpr Millis kFirstPause{100};
  static constexpr Millis kLongestPause{2000};

  // `subscription` and `url` name the handler in the logs (the url masked as `check` prints it).
  RefusedConnectGate(std::string subscription, const std::string& url);

  std::string_view name() const override { return "refused_connect"; }
  GateState StateAt(SteadyTime now) const override;
  void OnAnswer(const delivery::HandlerResponse& response, SteadyTime now) override;

 private:
  const std::string subscription_;
  const std::string url_;
  RetryStreak streak_{kFirstPause, kLongestPause};
  bool down_ = false;          // refused, and not answered since
  SteadyTime paused_until_{};  // down_: no POST before this
};

}  // namespace streamcar::runtime
