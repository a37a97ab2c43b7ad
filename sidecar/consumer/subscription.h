#pragma once
// The runtime of one subscription: a dispatcher, a reader (blocking connection), a settler (its
// own connection), `concurrency` delivery workers and an optional health probe, wired together.
// Shutdown is in stages so the engine can order them across subscriptions (SPEC 4.5).

#include <memory>
#include <vector>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/config/config.h"
#include "sidecar/consumer/dispatcher.h"
#include "sidecar/consumer/health_probe.h"
#include "sidecar/consumer/reader.h"
#include "sidecar/consumer/settler.h"
#include "sidecar/consumer/worker.h"
#include "sidecar/redis/session.h"

namespace streamcar::consumer {

struct SubscriptionDeps {
  redis::ConnectionOptions redis;
  redis::RedisHealth* redis_health = nullptr;
  admin::Metrics* metrics = nullptr;
  admin::Watchdog* watchdog = nullptr;
  std::string consumer_name;
  std::function<void()> group_ready;
  std::function<void(Status)> fatal;
};

class SubscriptionRuntime {
 public:
  SubscriptionRuntime(const config::Subscription& subscription, const SubscriptionDeps& deps);
  ~SubscriptionRuntime();

  void Start();
  // Stage 1: no new reads, no new deliveries, no retry claims or reclaims (in-flight requests go
  // on). Request it of every subscription before waiting for any (SPEC 4.5: no new reads).
  void RequestStopIntake();
  void JoinIntake();
  void StopIntake() {
    RequestStopIntake();
    JoinIntake();
  }
  // Stage 2: wait for in-flight requests; true when all finished before `deadline`.
  bool WaitForDeliveries(SteadyTime deadline);
  // Stage 3: settle what is pending (acks, dead letters), until `deadline`.
  void FinishSettling(SteadyTime deadline);

  // Entries held: how many may stay pending after a shutdown.
  size_t held() const { return dispatcher_.Held(); }
  // Per-subscription capacity: the reader never holds more than this many entries.
  static size_t CapacityFor(const config::Subscription& subscription);

 private:
  const config::Subscription& sub_;
  Dispatcher dispatcher_;
  std::unique_ptr<Settler> settler_;
  std::unique_ptr<Reader> reader_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<HealthProbe> health_probe_;
};

}  // namespace streamcar::consumer
