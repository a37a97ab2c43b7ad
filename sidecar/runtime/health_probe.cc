#include "sidecar/runtime/health_probe.h"

#include <prometheus/gauge.h>

#include <algorithm>
#include <utility>

#include "sidecar/common/log.h"

namespace streamcar::runtime {

HealthProbe::HealthProbe(EventLoop& loop, const config::Subscription& subscription,
                         delivery::HandlerClient* client, EntryLedger* ledger,
                         admin::SubscriptionMetrics* metrics, std::function<void()> changed)
    : sub_(subscription),
      client_(client),
      ledger_(ledger),
      metrics_(metrics),
      changed_(std::move(changed)),
      timer_(loop.CreateTimer([this] { ProbeNow(); })) {}

void HealthProbe::Start() {
  // Nothing is delivered before the first check passes.
  ledger_->SetHealthPaused(true);
  metrics_->handler_up->Set(0);
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
  if (healthy == healthy_) return;
  healthy_ = healthy;
  ledger_->SetHealthPaused(!healthy);
  metrics_->handler_up->Set(healthy ? 1 : 0);
  if (healthy) {
    LogInfo("handler health check passes; consumption resumes", {{"subscription", sub_.name}});
  } else {
    LogWarn("handler health check fails; consumption paused",
            {{"subscription", sub_.name}, {"health_url", sub_.handler.health_url}});
  }
  changed_();
}

}  // namespace streamcar::runtime
