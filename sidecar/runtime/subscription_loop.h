#pragma once
// One subscription on one thread: an event loop that owns the subscription's two Redis
// connections (blocking reads on one; setup, settlement, claims, keepalive, the reclaim beat and
// the gauges pipelined on the other), its handler connections (up to handler.concurrency requests
// in flight), its timers, and the single-threaded parts they drive:
//
//   PlainIntake ──Route──> EntryLedger <──TakeReady── DeliveryPump ──> HandlerClient
//        ^                     ^   \                       │
//        └──Poke (room)────────┘    └── Settlement <───────┘ outcomes
//
// Every event ends in Kick(): deliver what is ready, flush what settlement has due, read if there
// is room, and re-arm the timers. Nothing on the loop blocks: Redis connections are opened off
// the loop (redis/connector.h).
//
// Shutdown is in stages so that app/run.cc can order them across subscriptions (SPEC 4.5); each
// stage is posted to the loop and awaited from the calling thread.

#include <atomic>
#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/common/clock.h"
#include "sidecar/common/event_loop.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/consumer_lease.h"
#include "sidecar/redis/session.h"
#include "sidecar/runtime/attempt_observer.h"
#include "sidecar/runtime/delivery_gate.h"
#include "sidecar/runtime/progress_report.h"
#include "sidecar/runtime/shared_token_bucket.h"
#include "sidecar/runtime/tuning.h"

namespace streamcar::runtime {

class Ownership;

struct SubscriptionDeps {
  redis::ConnectionOptions redis;
  redis::RedisHealth* redis_health = nullptr;
  admin::Metrics* metrics = nullptr;
  admin::Watchdog* watchdog = nullptr;
  admin::Readiness* readiness = nullptr;  // sharded: a refused configuration is not ready
  std::string consumer_name;
  Tuning tuning;  // the lingers (runtime/tuning.h)
  // consumer.reap_idle (SPEC 4.6): > 0 turns consumer reaping on (plain loops only: config
  // validation refuses it with sharded subscriptions, and a shard's loop never reaps).
  Millis reap_idle{0};
  // The dead-letter stream is in another slot than the stream (cluster, an explicit
  // dead_letter.stream: SPEC 8), so the one-step script would be refused with CROSSSLOT: dead
  // letters are XADDed first on a connection of their own to the dead-letter stream's slot, and
  // the original acknowledged second (runtime/settlement.h). Works on any server (tests force it
  // against a standalone one).
  bool dead_letter_two_step = false;
  // SPEC 4.7: who this process is to the consumer-name lease, which a plain subscription takes
  // before it reads and holds while it delivers (runtime/consumer_lease.h). Unset for a shard's
  // loop: its member's membership makes it the shard's only owner (SHARDING.md).
  std::optional<redis::LeaseIdentity> consumer_lease;
  bool wait_for_name = false;                // consumer.wait_for_name
  std::function<void()> group_ready;         // the group exists (readiness); any thread
  std::function<void(const Status&)> fatal;  // retrying cannot fix it: exit 1; any thread
  const Clock* clock = &SystemClock::Instance();

  // Where the loop's ownership of its stream comes from (runtime/ownership.h): its steps, its
  // entry source, and what differs per owner. Null: a plain subscription (PlainOwnership). One
  // shard of a sharded subscription gets its grant's (sharding/shard_ownership.h).
  std::shared_ptr<const Ownership> ownership;
  // What the loop reports into instead of metrics->ForSubscription(name) (a shard's loop:
  // admin::MemberMetrics::ForShard). Outlives the loop.
  admin::SubscriptionMetrics* subscription_metrics = nullptr;
  // Gates of its own this loop's delivery asks before each POST (runtime/delivery_gate.h),
  // besides the handler's (refused connect, health): a shard's loop gets its member's lease
  // (sharding/lease_gate.h). Each makes its gate, once, on the loop thread.
  std::vector<std::function<std::unique_ptr<DeliveryGate>()>> gates;
  // handler.max_rps's bucket when the loop shares it (runtime/shared_token_bucket.h): a shard's
  // loop gets its member's, one per subscription in this process. Null: the loop's own, if any.
  std::shared_ptr<SharedTokenBucket> rate_limit;
  // Observers of its own that hear of every attempt besides the metrics (attempt_observer.h):
  // the span per attempt (telemetry/tracing_observer.h) when tracing is on. Each makes its
  // observer, once, for the subscription the loop delivers; none while tracing is off.
  std::vector<
      std::function<std::unique_ptr<AttemptObserver>(const config::Subscription&, const Clock&)>>
      observers;
};

// Settling (stage 3) gets what is left of the drain time, and at least this long to flush the
// acks of work that finished: otherwise those entries are delivered again.
inline constexpr Millis kSettleFloor{2000};

class SubscriptionLoop {
 public:
  SubscriptionLoop(const config::Subscription& subscription, SubscriptionDeps deps);
  ~SubscriptionLoop();
  SubscriptionLoop(const SubscriptionLoop&) = delete;
  SubscriptionLoop& operator=(const SubscriptionLoop&) = delete;

  // Starts the loop thread. Fails only when the loop cannot be created (epoll, timerfd).
  Status Start();

  // Stage 1: no new reads, no new deliveries, no retry claims or reclaims (in-flight requests go
  // on). Request it of every subscription before waiting for any (SPEC 4.5: no new reads).
  void RequestStopIntake();
  // Waits until no read is outstanding any more (a BLOCK read in progress is ended at once).
  void JoinIntake();
  // Stage 2: waits for the requests in flight; true when all finished before `deadline`. When
  // some did not, their connections are closed: those entries stay pending in Redis. A
  // `cut_short` flag set meanwhile (by another thread) ends the wait as the deadline would.
  bool WaitForDeliveries(SteadyTime deadline, const std::atomic<bool>* cut_short = nullptr);
  // Stage 3: settles what is queued (acks, dead letters) until `deadline`, takes back the
  // delivery count of entries read but never POSTed, and ends the thread. Callers give it at
  // least kSettleFloor past the end of stage 2.
  void FinishSettling(SteadyTime deadline);

  // Entries held: how many may stay pending after a shutdown. Any thread.
  size_t held() const { return held_.load(std::memory_order_relaxed); }
  // The loop's last settlement and pending count, when its ownership reports them
  // (Ownership::ReportsProgress; else empty). Any thread.
  ProgressReport::Snapshot progress() const { return progress_.Read(); }
  // Per-subscription capacity: intake never holds more than this many entries. For one shard of
  // a sharded subscription (its ShardSubscription), at least kShardReadAhead.
  static size_t CapacityFor(const config::Subscription& subscription);
  static constexpr size_t kShardReadAhead = 64;

 private:
  class Core;

  // Runs `work` on the loop thread and waits for it.
  void RunOnLoop(std::function<void()> work);

  const config::Subscription& sub_;
  SubscriptionDeps deps_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Core> core_;  // created, used and destroyed on the loop thread only
  std::thread thread_;
  std::atomic<size_t> held_{0};
  ProgressReport progress_;
  // Set once each, on the loop; waited for by the stages (any number of times).
  std::promise<void> intake_stopped_;
  std::promise<void> deliveries_done_;
  std::promise<void> settled_;
  std::shared_future<void> intake_stopped_future_ = intake_stopped_.get_future().share();
  std::shared_future<void> deliveries_done_future_ = deliveries_done_.get_future().share();
  std::shared_future<void> settled_future_ = settled_.get_future().share();
  std::atomic<bool> loop_ended_{false};  // the loop thread has left Run()
  bool intake_stop_requested_ = false;
  bool deliveries_awaited_ = false;
  bool finished_ = false;
};

}  // namespace streamcar::runtime
