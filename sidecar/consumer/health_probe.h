#pragma once
// Polls handler.health_url (when set) once a second; while it does not answer 2xx, delivery and
// reading pause (SPEC 3.2). Own thread, own HTTP client.

#include <memory>
#include <thread>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/config/config.h"
#include "sidecar/consumer/dispatcher.h"

namespace streamcar::consumer {

class HealthProbe {
 public:
  HealthProbe(const config::Subscription& subscription, Dispatcher* dispatcher,
              admin::SubscriptionMetrics* metrics, admin::Watchdog::Loop* loop);
  ~HealthProbe();
  void Start();
  void StopAndJoin();

  static constexpr Millis kInterval{1000};

 private:
  void Run();

  const config::Subscription& sub_;
  Dispatcher* dispatcher_;
  admin::SubscriptionMetrics* metrics_;
  admin::Watchdog::Loop* loop_;
  StopSignal stop_;
  std::thread thread_;
};

}  // namespace streamcar::consumer
