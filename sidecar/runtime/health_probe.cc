#include "sidecar/runtime/health_probe.h"

#include <algorithm>
#include <utility>

#include "sidecar/common/log.h"
#include "sidecar/config/redis_url.h"

namespace streamcar::runtime {

HealthProbe::HealthProbe(EventLoop& loop, const config::Subscription& subscription,
                         delivery::HandlerClient* client, HealthGate* gate,
                         AttemptObserver* observer, std::function<void()> changed)
    : sub_(subscription),
      client_(client),
      gate_(gate),
      observer_(observer),
      changed_(std::move(changed)),
      timer_(loop.CreateTimer([this] { ProbeNow(); })) {}

void HealthProbe::Start() {
  // Nothing is delivered before the first check passes.
  gate_->SetHealthy(false);
  observer_->OnHealthVerdict(false);
  ProbeNow();
}

void HealthProbe::Stop() {
  stopped_ = true;
  timer_->Cancel();
}

void HealthProbe::ProbeNow() {
  if (stopped_) return;
  client_->Probe(std::min(sub_.handler.timeout, Millis(5000)), [this](bool healthy) {
    if (stopped_) return;
    OnVerdict(healthy);
    timer_->ArmIn(kInterval);
  });
}

void HealthProbe::OnVerdict(bool healthy) {
  if (healthy == gate_->healthy()) return;
  gate_->SetHealthy(healthy);
  observer_->OnHealthVerdict(healthy);
  if (healthy) {
    LogInfo("handler health check passes; consumption resumes", {{"subscription", sub_.name}});
  } else {
    LogWarn("handler health check fails; consumption paused",
            {{"subscription", sub_.name},
             {"health_url", config::MaskUrlPassword(sub_.handler.health_url)}});
  }
  changed_();
}

}  // namespace streamcar::runtime
