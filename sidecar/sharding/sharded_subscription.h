#pragma once
// One sharded subscription of this process (SHARDING.md B7): the member. Its own thread runs an
// EventLoop that heartbeats the coordinator script over a HeartbeatLink; the Membership state
// machine says which shards to start, drain or drop; each shard it holds runs as a
// runtime::SubscriptionLoop on the shard's stream with the fenced steps of its grant
// (ShardOwnership, handed in SubscriptionDeps).
//
// Time: cadences and deadlines come from deps.clock (the loop's clock, the shard loops' too); the
// lease (B6) from the lease clock, CLOCK_BOOTTIME unless a test injects one.
//
// Threads: the member thread owns the Membership and the shard loops' lifetimes. A shard loop
// reports (fenced, started) by posting to the member's loop. A drain or a drop runs the loop's
// blocking shutdown stages on a short-lived thread of its own (a stopper), so that heartbeats go
// on. The lease deadline is published as an atomic for the loops' lease gates (lease_gate.h),
// asked before each POST.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/admin/member_metrics.h"
#include "sidecar/common/clock.h"
#include "sidecar/common/event_loop.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/keys/sharding_keys.h"
#include "sidecar/runtime/shared_token_bucket.h"
#include "sidecar/runtime/subscription_loop.h"
#include "sidecar/sharding/boot_clock.h"
#include "sidecar/sharding/heartbeat_link.h"
#include "sidecar/sharding/membership.h"

namespace streamcar::sharding {

class ShardedSubscription {
 public:
  // `deps` is what each shard loop gets (its ownership, lease gate and `group_ready` are set
  // here); `ready` is called once, after the first accepted heartbeat. `lease_clock`
  // (tests; it must outlive the member): the lease's clock instead of the member's own BootClock.
  ShardedSubscription(const config::Subscription& sub, runtime::SubscriptionDeps deps,
                      std::string member_id, std::function<void()> ready,
                      const Clock* lease_clock = nullptr);
  ~ShardedSubscription();
  ShardedSubscription(const ShardedSubscription&) = delete;
  ShardedSubscription& operator=(const ShardedSubscription&) = delete;

  Status Start();
  // Any thread. SIGTERM (B7 LEAVING): drain every shard, then leave (-1, or -2 with an instance
  // id), by `deadline` at the latest; then the thread ends.
  void Leave(SteadyTime deadline);
  // Any thread. After Leave(): waits until the member has left (or dropped what was left at the
  // deadline) and every shard loop has ended.
  void Join();
  // Any thread. Entries held by the shard loops (what may stay pending after a shutdown).
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

  // The member thread: the loop's parts are made, run and destroyed on it.
  void RunOnThread();
  void LeaveOnLoop(SteadyTime deadline);
  // Every event ends here: the watchdog, the lease, the gauges, the end of a leave, a heartbeat
  // owed at once, the wake-up for the lease's end and the leave deadline.
  void Tick();
  // Leaving, and nothing more to wait for: the member has left, the deadline came, or Redis has
  // been out of reach for a while with every loop ended.
  bool LeaveDone() const;

  // member_heartbeat.cc: one beat out, and its answer applied.
  void SendBeat();
  HeartbeatRequest NextRequest();
  // False when no answer came (Redis unreachable, an error reply).
  bool OnBeatAnswer(const StatusOr<redis::Reply>& reply, SteadyTime sent);
  void AcceptReply(const HeartbeatReply& reply);
  void LogReply(const HeartbeatReply& reply);
  void BeatAnswered(const StatusOr<redis::Reply>& reply, SteadyTime sent);

  // The end (leave done, or the destructor): every loop still running is dropped and waited
  // for, then the leave is told if it was not (best effort), then the loop stops.
  void Finish();
  void FinishAfterBeat();

  void Apply(const MemberActions& actions);
  void StartShard(const ShardGrant& grant);
  // What one shard's loop gets: the member's deps with the grant's fence and the member's lease.
  runtime::SubscriptionDeps ShardDeps(const ShardGrant& grant, const ShardRun& run);
  // Ends the shard's loop on a thread of its own: `drain_for` 0 drops it at once (and cuts a
  // drain in progress short).
  void StopShard(int shard, Millis drain_for);
  // A stopped run is gone: what follows is the Membership's call (drained, started again on a
  // grant that came meanwhile, or nothing).
  void ShardStopped(int shard);
  // Any thread: `event` is handled on the member's loop.
  void Post(Event event);
  void HandleEvent(const Event& event);
  // The member's gauges (SHARDING.md C1) after a heartbeat or an event.
  void PublishState();
  void PublishHeld();
  // How long a drain may take: drain_timeout, or less while leaving (it must end in time for
  // its settling and the leave heartbeat).
  Millis DrainBudget() const;
  double SecondsSince(SteadyTime since) const;

  const config::Subscription& sub_;
  runtime::SubscriptionDeps deps_;
  std::function<void()> ready_;
  std::string member_id_;
  admin::MemberMetrics& metrics_;
  const keys::CoordinatorKeys coordinator_keys_;
  const Clock& clock_;  // deps_.clock: cadences, deadlines, durations
  BootClock own_lease_clock_;
  const Clock& lease_clock_;
  Membership membership_;
  std::atomic<int64_t> lease_deadline_ns_{0};  // lease clock time; 0: no lease
  // handler.max_rps's bucket, shared by every shard loop this member runs (each on its own
  // thread): the limit protects the one handler next to this process. Null without max_rps.
  const std::shared_ptr<runtime::SharedTokenBucket> rate_limit_;
  std::unique_ptr<EventLoop> loop_;

  // Member thread only, from here to the end.
  std::unique_ptr<HeartbeatLink> link_;
  std::unique_ptr<EventLoop::Timer> beat_timer_;  // the next heartbeat
  std::unique_ptr<EventLoop::Timer> wake_timer_;  // the lease's end, the leave deadline
  std::map<int, ShardRun> shards_;
  std::map<int, std::thread> stoppers_;       // shard -> its stopper
  std::map<int, SteadyTime> revoking_since_;  // revoke notice times
  uint64_t next_run_id_ = 1;
  // Refused steps not yet in a heartbeat that reached the script, by op.
  std::map<std::string, int64_t, std::less<>> fenced_ops_unreported_;
  bool beat_now_ = false;  // heartbeat at once (after the one in flight)
  bool leaving_ = false;   // Leave() applied
  SteadyTime leave_by_{};  // the leave deadline
  // Since when no heartbeat has been answered: the start of the first unanswered one (max: the
  // last one was answered).
  SteadyTime unreachable_since_ = SteadyTime::max();
  // Shard events and the leave that came while a heartbeat was out. The Membership's request
  // and reply alternate (its reply clears what the request reported), so it changes between
  // heartbeats only, as when the heartbeat blocked the member thread.
  std::vector<std::function<void()>> deferred_;
  bool finishing_ = false;       // Finish() began: no shard starts any more
  bool last_beat_sent_ = false;  // Finish()'s leave heartbeat
  admin::Watchdog::Loop* watchdog_ = nullptr;

  std::atomic<size_t> held_{0};
  std::thread thread_;
};

}  // namespace streamcar::sharding
