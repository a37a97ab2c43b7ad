#pragma once
// The handler's health check on the subscription's loop (handler.health_url, SPEC 3.1): nothing
// is delivered or read before the first 2xx; afterwards a GET every second pauses consumption
// while it fails and resumes it when it passes. The pause is its gate's (health_gate.h). Without
// a health_url there is no probe: a refused connection pauses delivery instead
// (refused_connect_gate.h).
//
// Loop thread only.

#include <functional>
#include <memory>

#include "sidecar/common/event_loop.h"
#include "sidecar/config/config.h"
#include "sidecar/delivery/handler_client.h"
#include "sidecar/runtime/attempt_observer.h"
#include "sidecar/runtime/cadences.h"
#include "sidecar/runtime/health_gate.h"

namespace streamcar::runtime {

class HealthProbe {
 public:
  static constexpr Millis kInterval = cadence::kHealthProbe;

  // `changed` runs when the verdict flips (the loop delivers and reads again).
  HealthProbe(EventLoop& loop, const config::Subscription& subscription,
              delivery::HandlerClient* client, HealthGate* gate, AttemptObserver* observer,
              std::function<void()> changed);

  void Start();
  // No probe from now on (shutdown); an answer still on its way is ignored.
  void Stop();

 private:
  void ProbeNow();
  void OnVerdict(bool healthy);

  const config::Subscription& sub_;
  delivery::HandlerClient* client_;
  HealthGate* gate_;
  AttemptObserver* observer_;
  std::function<void()> changed_;
  std::unique_ptr<EventLoop::Timer> timer_;
  bool stopped_ = false;
};

}  // namespace streamcar::runtime
