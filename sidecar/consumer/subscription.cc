#include "sidecar/consumer/subscription.h"

#include <condition_variable>

namespace streamcar::consumer {
namespace {

redis::ConnectionOptions WithName(redis::ConnectionOptions options, const std::string& name) {
  options.client_name = name;
  return options;
}

}  // namespace

size_t SubscriptionRuntime::CapacityFor(const config::Subscription& subscription) {
  // Four times what the workers carry at once: the reader refills in reads of a quarter of it
  // while the workers still have a full round queued, and memory stays bounded however long the
  // stream is.
  return static_cast<size_t>(subscription.handler.concurrency) *
         static_cast<size_t>(subscription.handler.batch_size) * 4;
}

SubscriptionRuntime::SubscriptionRuntime(const config::Subscription& subscription,
                                         const SubscriptionDeps& deps)
    : sub_(subscription),
      dispatcher_(CapacityFor(subscription), subscription.ordering.key_field,
                  subscription.handler.max_held_bytes) {
  auto& metrics = deps.metrics->ForSubscription(sub_.name);
  redis::StreamOps ops(sub_.stream, sub_.group, deps.consumer_name);
  const std::string prefix = "streamcar:" + deps.consumer_name + ":" + sub_.name;
  // A settler can be silent for a whole reconnect backoff plus a command timeout.
  const Millis redis_limit = deps.redis.command_timeout * 2 + Millis(30000);
  settler_ = std::make_unique<Settler>(
      sub_, ops,
      std::make_unique<redis::Session>(WithName(deps.redis, prefix + ":settle"),
                                       sub_.name + "/settle", deps.redis_health),
      &dispatcher_, &metrics, deps.watchdog->Register(sub_.name + "/settler", redis_limit),
      deps.fatal);
  reader_ = std::make_unique<Reader>(
      sub_, ops,
      std::make_unique<redis::Session>(WithName(deps.redis, prefix + ":read"), sub_.name + "/read",
                                       deps.redis_health),
      &dispatcher_, settler_.get(), &metrics,
      deps.watchdog->Register(sub_.name + "/reader", redis_limit + Reader::kBlock),
      ReaderCallbacks{deps.group_ready, deps.fatal});
  // A worker is silent for at most one request (batch or not) plus its queue wait.
  const Millis worker_limit = sub_.handler.timeout * 2 + Millis(30000);
  for (int i = 0; i < sub_.handler.concurrency; ++i) {
    workers_.push_back(std::make_unique<Worker>(
        sub_, &dispatcher_, settler_.get(), &metrics,
        deps.watchdog->Register(sub_.name + "/worker" + std::to_string(i), worker_limit)));
  }
  if (!sub_.handler.health_url.empty()) {
    health_probe_ = std::make_unique<HealthProbe>(
        sub_, &dispatcher_, &metrics,
        deps.watchdog->Register(sub_.name + "/health", sub_.handler.timeout + Millis(30000)));
  }
}

SubscriptionRuntime::~SubscriptionRuntime() {
  StopIntake();
  WaitForDeliveries(SteadyClock::now());
  FinishSettling(SteadyClock::now());
}

void SubscriptionRuntime::Start() {
  settler_->Start();
  for (auto& worker : workers_) worker->Start();
  if (health_probe_) health_probe_->Start();
  reader_->Start();
}

void SubscriptionRuntime::RequestStopIntake() {
  dispatcher_.Stop();
  settler_->BeginDraining();
  reader_->RequestStop();
}

void SubscriptionRuntime::JoinIntake() {
  reader_->Join();
  if (health_probe_) health_probe_->StopAndJoin();
}

bool SubscriptionRuntime::WaitForDeliveries(SteadyTime deadline) {
  // Workers finish their current request on their own; poll so the deadline holds even when a
  // handler never answers (the request then stays pending in Redis).
  while (dispatcher_.in_flight() > 0 && SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(Millis(10));
  }
  if (dispatcher_.in_flight() > 0) return false;
  for (auto& worker : workers_) worker->Join();
  return true;
}

void SubscriptionRuntime::FinishSettling(SteadyTime deadline) { settler_->FinishAndJoin(deadline); }

}  // namespace streamcar::consumer
