#pragma once
// The gates of one subscription loop's delivery (delivery_gate.h): the handler's own, the
// refused-connect pause and, with a health_url, the health check's (whose probe this makes), the
// circuit breaker and the rate limit when configured (SPEC 11), then those the loop's deps bring
// (a shard's lease).
//
// Loop thread only.

#include <functional>
#include <memory>
#include <vector>

#include "sidecar/common/event_loop.h"
#include "sidecar/config/config.h"
#include "sidecar/delivery/handler_client.h"
#include "sidecar/runtime/attempt_observer.h"
#include "sidecar/runtime/delivery_gates.h"
#include "sidecar/runtime/health_probe.h"
#include "sidecar/runtime/shared_token_bucket.h"

namespace streamcar::runtime {

// Adds them to `gates`; the health probe, when there is one, is the caller's to start. `changed`
// runs when the probe's verdict flips. `rate_limit`: the bucket of handler.max_rps when the loop
// shares it (a shard's loop: its member's); null: the loop's own. Every pointer outlives what
// is made.
std::unique_ptr<HealthProbe> AddDeliveryGates(
    EventLoop& loop, const config::Subscription& sub,
    const std::vector<std::function<std::unique_ptr<DeliveryGate>()>>& more,
    std::shared_ptr<SharedTokenBucket> rate_limit, delivery::HandlerClient* client,
    AttemptObserver* observer, std::function<void()> changed, DeliveryGates* gates);

}  // namespace streamcar::runtime
