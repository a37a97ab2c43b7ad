#include "sidecar/runtime/handler_gates.h"

#include <utility>

#include "sidecar/runtime/circuit_breaker_gate.h"
#include "sidecar/runtime/health_gate.h"
#include "sidecar/runtime/rate_limit_gate.h"
#include "sidecar/runtime/refused_connect_gate.h"

namespace streamcar::runtime {

std::unique_ptr<HealthProbe> AddDeliveryGates(
    EventLoop& loop, const config::Subscription& sub,
    const std::vector<std::function<std::unique_ptr<DeliveryGate>()>>& more,
    std::shared_ptr<SharedTokenBucket> rate_limit, delivery::HandlerClient* client,
    AttemptObserver* observer, std::function<void()> changed, DeliveryGates* gates) {
  gates->Add(std::make_unique<RefusedConnectGate>(sub.name, sub.handler.url));
  std::unique_ptr<HealthProbe> probe;
  if (!sub.handler.health_url.empty()) {
    auto gate = std::make_unique<HealthGate>();
    probe =
        std::make_unique<HealthProbe>(loop, sub, client, gate.get(), observer, std::move(changed));
    gates->Add(std::move(gate));
  }
  if (sub.circuit_breaker.enabled()) {
    gates->Add(std::make_unique<CircuitBreakerGate>(sub.name, sub.circuit_breaker,
                                                    delivery::OutcomePolicyOf(sub), observer));
  }
  if (rate_limit) {
    gates->Add(std::make_unique<RateLimitGate>(std::move(rate_limit), observer));
  } else if (sub.handler.max_rps > 0) {
    gates->Add(
        std::make_unique<RateLimitGate>(sub.handler.max_rps, sub.handler.concurrency, observer));
  }
  for (const auto& make_gate : more) gates->Add(make_gate());
  return probe;
}

}  // namespace streamcar::runtime
