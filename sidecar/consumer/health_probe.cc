#include "sidecar/consumer/health_probe.h"

#include <prometheus/gauge.h>

#include "sidecar/common/log.h"
#include "sidecar/delivery/http_deliverer.h"

namespace streamcar::consumer {

HealthProbe::HealthProbe(const config::Subscription& subscription, Dispatcher* dispatcher,
                         admin::SubscriptionMetrics* metrics, admin::Watchdog::Loop* loop)
    : sub_(subscription), dispatcher_(dispatcher), metrics_(metrics), loop_(loop) {}

HealthProbe::~HealthProbe() { StopAndJoin(); }

void HealthProbe::Start() {
  thread_ = std::thread([this] { Run(); });
}

void HealthProbe::StopAndJoin() {
  stop_.Request();
  if (thread_.joinable()) thread_.join();
}

void HealthProbe::Run() {
  delivery::HttpDeliverer probe(sub_.handler.health_url,
                                std::min(sub_.handler.timeout, Millis(5000)));
  // Nothing is delivered before the first check passes.
  bool healthy = false;
  dispatcher_->SetHealthPaused(true);
  metrics_->handler_up->Set(0);
  do {
    loop_->Beat();
    const bool now_healthy = probe.Get();
    if (now_healthy != healthy) {
      healthy = now_healthy;
      dispatcher_->SetHealthPaused(!healthy);
      metrics_->handler_up->Set(healthy ? 1 : 0);
      if (healthy) {
        LogInfo("handler health check passes; consumption resumes", {{"subscription", sub_.name}});
      } else {
        LogWarn("handler health check fails; consumption paused",
                {{"subscription", sub_.name}, {"health_url", sub_.handler.health_url}});
      }
    }
  } while (!stop_.WaitFor(kInterval));
  loop_->Retire();
}

}  // namespace streamcar::consumer
