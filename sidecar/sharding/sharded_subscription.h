#pragma once
// One sharded subscription of this process (SHARDING.md B7): the member. Its own thread and Redis
// session heartbeat the coordinator script; the Membership state machine says which shards to
// start, drain or drop; each shard it holds runs as a runtime::SubscriptionLoop on the shard's
// stream with the fenced steps of its grant (ShardOwnership, handed in SubscriptionDeps).
//
// Threads: the member thread owns the Membership and the shard loops' lifetimes. A shard loop
// reports (fenced, started) through a queue the member thread drains. A drain or a drop runs the
// loop's blocking shutdown stages on a short-lived thread of its own, so that heartbeats go on.
// The lease deadline is published as an atomic for the loops' lease gates (lease_gate.h), asked
// before each POST.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/admin/member_metrics.h"
#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/keys/sharding_keys.h"
#include "sidecar/runtime/subscription_loop.h"
#include "sidecar/sharding/boot_clock.h"
#include "sidecar/sharding/membership.h"

namespace streamcar::sharding {

class ShardedSubscription {
 public:
  // `deps` is what each shard loop gets (its `shard`, `fenced`, lease gate and `group_ready`
  // are set here); `ready` is called once, after the first accepted heartbeat.
  ShardedSubscription(const config::Subscription& sub, runtime::SubscriptionDeps deps,
                      std::string member_id, std::function<void()> ready);
  ~ShardedSubscription();
  ShardedSubscription(const ShardedSubscription&) = delete;
  ShardedSubscription& operator=(const ShardedSubscription&) = delete;

  Status Start();
  // SIGTERM (B7 LEAVING): drain every shard, then leave (-1, or -2 with an instance id), by
  // `deadline` at the latest; then the thread ends.
  void Leave(SteadyTime deadline);
  // After Leave(): waits until the member has left (or dropped what was left at the deadline)
  // and every shard loop has ended.
  void Join();
  // Entries held by the shard loops (what may stay pending after a shutdown).
  size_t held() const;

 private:
  // One loop on one shard, from a grant until its stopper has ended it. A shard has at most
  // one run: a grant that comes while the previous run stops starts once it has stopped.
  struct ShardRun {
    uint64_t id = 0;                            // tells its events from an earlier run's
    std::unique_ptr<config::Subscription> sub;  // the shard's own subscription (outlives loop)
    std::unique_ptr<runtime::SubscriptionLoop> loop;
    bool stopping = false;  // a stopper thread owns the loop's shutdown
    // Set by a drop while a drain runs: the stopper stops waiting for deliveries at once.
    std::shared_ptr<std::atomic<bool>> cut_short = std::make_shared<std::atomic<bool>>(false);
    SteadyTime granted_at{};  // for streamcar_takeover_duration_seconds
    int64_t token = 0;        // the grant's
  };
  struct Event {
    enum class Kind { kStarted, kFenced, kStopped } kind;
    int shard = 0;
    uint64_t run = 0;     // the ShardRun's id
    int64_t token = 0;    // kStarted: the run's token; kFenced: the installed one
    std::string_view op;  // kFenced: the step refused (a string literal)
  };

  void Run();
  // False when no answer came (Redis unreachable, an error reply).
  bool Heartbeat();
  void Apply(const MemberActions& actions);
  void StartShard(const ShardGrant& grant);
  // Ends the shard's loop on a thread of its own: `drain_for` 0 drops it at once (and cuts a
  // drain in progress short).
  void StopShard(int shard, Millis drain_for);
  // A stopped run is gone: what follows is the Membership's call (drained, started again on a
  // grant that came meanwhile, or nothing).
  void ShardStopped(int shard);
  void Post(Event event);
  void HandleEvents();
  // When the member thread must wake up: the next heartbeat, the lease's end, the leave deadline.
  SteadyTime NextWake(SteadyTime next_beat, bool leaving) const;
  // The member's gauges (SHARDING.md C1) after a heartbeat or an event.
  void PublishState();
  // How long a drain may take: drain_timeout, or less while leaving (it must end in time for
  // its settling and the leave heartbeat).
  Millis DrainBudget() const;

  const config::Subscription& sub_;
  runtime::SubscriptionDeps deps_;
  std::function<void()> ready_;
  std::string member_id_;
  admin::MemberMetrics& metrics_;
  const keys::CoordinatorKeys coordinator_keys_;
  BootClock lease_clock_;
  Membership membership_;
  std::unique_ptr<redis::Session> session_;
  std::atomic<int64_t> lease_deadline_ns_{0};  // BootClock time; 0: no lease
  std::map<int, ShardRun> shards_;             // member thread only
  std::map<int, std::thread> stoppers_;        // member thread only: shard -> its stopper
  std::map<int, SteadyTime> revoking_since_;   // member thread only: revoke notice times
  uint64_t next_run_id_ = 1;                   // member thread only
  // Refused steps not yet in a heartbeat that reached the script, by op; member thread only.
  std::map<std::string, int64_t, std::less<>> fenced_ops_unreported_;
  bool beat_now_ = false;                      // member thread only: heartbeat at once
  bool leaving_ = false;                       // member thread only: Leave() applied
  SteadyTime leave_by_{};                      // member thread only: the leave deadline
  admin::Watchdog::Loop* watchdog_ = nullptr;  // the member thread's

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Event> events_;
  bool leave_requested_ = false;
  SteadyTime leave_deadline_{};
  std::atomic<size_t> held_{0};

  std::thread thread_;
};

}  // namespace streamcar::sharding
