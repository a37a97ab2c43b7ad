#include "sidecar/sharding/sharded_subscription.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <memory>

#include "sidecar/common/log.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/redis/connection.h"
#include "sidecar/sharding/heartbeat.h"
#include "sidecar/sharding/lease_gate.h"
#include "sidecar/sharding/shard_ownership.h"
#include "sidecar/sharding/shard_subscription.h"

namespace streamcar::sharding {
namespace {

MembershipOptions OptionsOf(const config::Subscription& sub, std::string member_id,
                            const std::string& pod) {
  const config::ShardingConfig& s = sub.sharding;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return {.member_id = std::move(member_id),
          .instance_id = s.instance_id,
          .shard_count = s.shards,
          .session_timeout = s.session_timeout,
          .rebalance_timeout = s.rebalance_timeout,
          .heartbeat_interval = s.heartbeat_interval,
          .initial_delay = s.initial_delay,
          .min_assignment_interval = s.min_assignment_interval,
          .static_takeover_wait = s.static_takeover == config::StaticTakeover::kWait,
          .stall_timeout = s.stall_timeout,
          .revoke_stalled = s.revoke_stalled,
          .pod = pod,
          .host = host};
}

// The bucket every shard loop of this member shares (SPEC 11): max_rps with a burst of the
// subscription's concurrency, however many shards the member holds.
std::shared_ptr<runtime::SharedTokenBucket> RateLimitOf(const config::Subscription& sub) {
  if (sub.handler.max_rps <= 0) return nullptr;
  return std::make_shared<runtime::SharedTokenBucket>(sub.handler.max_rps,
                                                      static_cast<double>(sub.handler.concurrency));
}

}  // namespace

ShardedSubscription::ShardedSubscription(const config::Subscription& sub,
                                         runtime::SubscriptionDeps deps, std::string member_id,
                                         std::function<void()> ready, const Clock* lease_clock)
    : sub_(sub),
      deps_(std::move(deps)),
      ready_(std::move(ready)),
      member_id_(std::move(member_id)),
      metrics_(deps_.metrics->ForMember(sub.name)),
      coordinator_keys_(keys::CoordinatorKeysFor(sub.stream, sub.group)),
      clock_(*deps_.clock),
      lease_clock_(lease_clock != nullptr ? *lease_clock : own_lease_clock_),
      membership_(OptionsOf(sub, member_id_, deps_.consumer_name), lease_clock_),
      rate_limit_(RateLimitOf(sub)) {
  std::array<std::string_view, kHeartbeatStatuses.size()> statuses;
  std::ranges::transform(kHeartbeatStatuses, statuses.begin(), HeartbeatStatusName);
  metrics_.DeclareHeartbeatStatuses(statuses);
}

ShardedSubscription::~ShardedSubscription() {
  if (!thread_.joinable()) return;
  Leave(clock_.Now());
  thread_.join();
}

Status ShardedSubscription::Start() {
  auto loop = EventLoop::Create(clock_);
  if (!loop.ok()) return loop.status();
  loop_ = std::move(*loop);
  loop_->SetFatalHook([fatal = deps_.fatal](const Status& status) { fatal(status); });
  thread_ = std::thread([this] {
    const std::string name = ("sc:m:" + sub_.name).substr(0, 15);
    pthread_setname_np(pthread_self(), name.c_str());
    RunOnThread();
  });
  return Status::Ok();
}

void ShardedSubscription::RunOnThread() {
  watchdog_ = deps_.watchdog->Register(
      sub_.name + "/member",
      admin::Watchdog::LimitFor(sub_.sharding.heartbeat_interval + deps_.redis.command_timeout));
  redis::ConnectionOptions options = deps_.redis;
  options.client_name = redis::ClientName(deps_.consumer_name, {sub_.name, "member"});
  options.slot = keys::KeySlot(coordinator_keys_.meta);
  link_ = std::make_unique<HeartbeatLink>(*loop_, std::move(options), sub_.name + "/member",
                                          deps_.redis_health);
  link_->OnFatal([this](const Status& status) { deps_.fatal(status); });
  // Back after an outage: the heartbeat that failed goes again now, not an interval later.
  link_->OnReady([this] {
    if (unreachable_since_ != SteadyTime::max() && !link_->busy() && !finishing_) {
      beat_timer_->ArmAt(clock_.Now());
    }
  });
  beat_timer_ = loop_->CreateTimer([this] { SendBeat(); });
  wake_timer_ = loop_->CreateTimer([this] { Tick(); });
  beat_timer_->ArmAt(clock_.Now());
  Tick();
  loop_->Run();
  // A callback threw (the fatal hook has it) or Finish() stopped the loop: the loops still
  // running end here, as in Finish.
  if (!finishing_) {
    finishing_ = true;
    for (auto& [shard, run] : shards_) StopShard(shard, Millis(0));
  }
  for (auto& [shard, stopper] : stoppers_) stopper.join();
  stoppers_.clear();
  wake_timer_.reset();
  beat_timer_.reset();
  link_.reset();
  watchdog_->Retire();
}

void ShardedSubscription::Leave(SteadyTime deadline) {
  if (loop_ != nullptr) loop_->Post([this, deadline] { LeaveOnLoop(deadline); });
}

void ShardedSubscription::LeaveOnLoop(SteadyTime deadline) {
  if (leaving_ || finishing_) return;
  if (link_->busy()) {
    deferred_.emplace_back([this, deadline] { LeaveOnLoop(deadline); });
    return;
  }
  leaving_ = true;
  leave_by_ = deadline;
  Apply(membership_.Leave());
  beat_now_ = true;
  Tick();
}

void ShardedSubscription::Join() {
  if (thread_.joinable()) thread_.join();
}

size_t ShardedSubscription::held() const { return held_.load(std::memory_order_relaxed); }

void ShardedSubscription::Post(Event event) {
  loop_->Post([this, event] {
    if (finishing_) return;  // the stoppers' own ends are awaited by Finish
    if (link_->busy()) {
      deferred_.emplace_back([this, event] { HandleEvent(event); });
      return;
    }
    HandleEvent(event);
    Tick();
  });
}

void ShardedSubscription::Tick() {
  watchdog_->Beat();
  // The answer to the beat in flight comes first: it ticks again.
  if (finishing_ || link_->busy()) return;
  const bool was_lost = membership_.state() == MemberState::kLost;
  Apply(membership_.CheckLease());
  if (!was_lost && membership_.state() == MemberState::kLost) metrics_.Fenced("local_lease");
  PublishState();
  if (leaving_ && LeaveDone()) return Finish();
  if (beat_now_ && !link_->busy()) {
    beat_now_ = false;
    beat_timer_->ArmAt(clock_.Now());
  }
  // CheckLease must drop the shards when the lease ends, not at the next heartbeat.
  SteadyTime wake = SteadyTime::max();
  if (membership_.LeaseValid()) wake = clock_.Now() + membership_.LeaseRemaining() + Millis(1);
  if (leaving_) wake = std::min(wake, leave_by_);
  if (wake == SteadyTime::max()) {
    wake_timer_->Cancel();
  } else {
    wake_timer_->ArmAt(wake);
  }
}

bool ShardedSubscription::LeaveDone() const {
  // Leaving with every loop ended and Redis out of reach for a while (a heartbeat interval and a
  // command timeout: not one refused connect during a failover): the leave cannot be told and
  // nothing is left to drain, so waiting out the deadline would only hold the pod (the
  // coordinator expires this member after its session). A heartbeat due at once (a drain just
  // reported) is tried first.
  const SteadyTime now = clock_.Now();
  const bool unreachable =
      unreachable_since_ != SteadyTime::max() &&
      now - unreachable_since_ >= sub_.sharding.heartbeat_interval + deps_.redis.command_timeout;
  return membership_.state() == MemberState::kLeft || now >= leave_by_ ||
         (shards_.empty() && unreachable && !beat_now_);
}

void ShardedSubscription::Finish() {
  finishing_ = true;
  beat_timer_->Cancel();
  wake_timer_->Cancel();
  // Leaving or past the deadline: every loop still running is dropped. Its stopper posts its
  // end to this loop, which no longer handles it: the join is the wait.
  for (auto& [shard, run] : shards_) StopShard(shard, Millis(0));
  for (auto& [shard, stopper] : stoppers_) stopper.join();
  stoppers_.clear();
  PublishHeld();  // what the ended loops leave pending
  shards_.clear();
  if (!link_->busy()) FinishAfterBeat();  // else once the beat in flight is answered
}

void ShardedSubscription::FinishAfterBeat() {
  if (!leaving_ || membership_.state() == MemberState::kLeft || last_beat_sent_) {
    loop_->Stop();
    return;
  }
  // The deadline came first. Every loop has ended, so what still drained is done with, and the
  // coordinator hears the leave now rather than after a session timeout (best effort: one try
  // when Redis is out of reach).
  last_beat_sent_ = true;
  const std::map<int, ShardState> left = membership_.shards();
  for (const auto& [shard, state] : left) {
    if (state == ShardState::kDraining) membership_.ShardDrained(shard);
  }
  SendBeat();
}

void ShardedSubscription::StartShard(const ShardGrant& grant) {
  if (finishing_) return;  // a late answer's grant: the member is ending
  if (auto it = shards_.find(grant.shard); it != shards_.end()) {
    // The previous run is still there (stopping, or an old grant): ShardStopped starts the new
    // one once it has ended.
    StopShard(grant.shard, Millis(0));
    return;
  }
  ShardRun& run = shards_[grant.shard];
  run.id = next_run_id_++;
  run.sub = std::make_unique<config::Subscription>(ShardSubscription(sub_, grant.shard));
  run.granted_at = clock_.Now();
  run.token = grant.token;
  metrics_.SetShardOwned(grant.shard, true, grant.token);
  run.loop = std::make_unique<runtime::SubscriptionLoop>(*run.sub, ShardDeps(grant, run));
  if (Status started = run.loop->Start(); !started.ok()) deps_.fatal(started);
  LogInfo("shard granted",
          {{"subscription", sub_.name}, {"shard", grant.shard}, {"fence", grant.token}});
}

runtime::SubscriptionDeps ShardedSubscription::ShardDeps(const ShardGrant& grant,
                                                         const ShardRun& run) {
  runtime::SubscriptionDeps deps = deps_;
  deps.subscription_metrics = &metrics_.ForShard(grant.shard);
  deps.ownership = std::make_shared<ShardOwnership>(
      ShardOwnership::Grant{grant.shard, grant.token, member_id_, membership_.member_epoch()},
      ShardOwnership::Callbacks{
          [this, shard = grant.shard, id = run.id, token = grant.token] {
            Post({Event::Kind::kStarted, shard, id, token});
          },
          [this, shard = grant.shard, id = run.id](int64_t installed, std::string_view op) {
            Post({Event::Kind::kFenced, shard, id, installed, op});
          }});
  // The shard stays STARTING through its install and claim_all (B7); readiness is the member's.
  deps.group_ready = nullptr;
  // A dropped run sends nothing more, even when the member's lease is valid again: a rejoin
  // renews the lease before the stopper has ended this run's intake and deliveries (a sharded
  // chaos run caught a dropped run retrying under its old fence right after a rejoin).
  deps.gates.emplace_back([this, cut_short = run.cut_short] {
    return std::make_unique<LeaseGate>(lease_deadline_ns_, lease_clock_, cut_short);
  });
  deps.dead_letter_two_step = false;  // the shard's dead letters share its slot
  deps.rate_limit = rate_limit_;
  return deps;
}

void ShardedSubscription::StopShard(int shard, Millis drain_for) {
  auto it = shards_.find(shard);
  if (it == shards_.end() || !it->second.loop) return;
  ShardRun& run = it->second;
  if (run.stopping) {
    if (drain_for == Millis(0)) run.cut_short->store(true);  // a drop overtakes a drain
    return;
  }
  run.stopping = true;
  if (drain_for == Millis(0)) run.cut_short->store(true);
  runtime::SubscriptionLoop* loop = run.loop.get();
  stoppers_[shard] = std::thread([this, loop, shard, id = run.id, cut_short = run.cut_short,
                                  deadline = clock_.Now() + drain_for] {
    loop->RequestStopIntake();
    loop->JoinIntake();
    loop->WaitForDeliveries(deadline, cut_short.get());
    // Acks of finished work still go, through the fence: a newer owner's token refuses them, and
    // without one they save the next owner a redelivery. Reads never POSTed are taken back. A
    // drop gives this the floor only, not what is left of a drain.
    const SteadyTime floor = clock_.Now() + runtime::kSettleFloor;
    loop->FinishSettling(cut_short->load() ? floor : std::max(deadline, floor));
    Post({Event::Kind::kStopped, shard, id, 0});
  });
}

void ShardedSubscription::ShardStopped(int shard) {
  // The stopper has finished with the loop: join it, then the loop can go.
  if (auto stopper = stoppers_.find(shard); stopper != stoppers_.end()) {
    stopper->second.join();
    stoppers_.erase(stopper);
  }
  shards_.erase(shard);
  metrics_.ForgetShard(shard);  // its lag and pending are its next owner's to export
  metrics_.SetShardOwned(shard, false, 0);
  const auto state = membership_.shards().find(shard);
  if (state == membership_.shards().end()) return;  // dropped, or revoked and reported
  switch (state->second) {
    case ShardState::kDraining:
      if (auto since = revoking_since_.find(shard); since != revoking_since_.end()) {
        metrics_.RevokeTook(SecondsSince(since->second));
        revoking_since_.erase(since);
      }
      Apply(membership_.ShardDrained(shard));
      break;
    case ShardState::kStarting:
    case ShardState::kActive:  // granted again, or given back while it drained
      if (auto token = membership_.TokenOf(shard)) StartShard({shard, *token});
      break;
    case ShardState::kRevoked:
      break;
  }
}

void ShardedSubscription::Apply(const MemberActions& actions) {
  beat_now_ |= actions.heartbeat_now;
  for (int shard : actions.drop) {
    revoking_since_.erase(shard);
    StopShard(shard, Millis(0));
  }
  for (int shard : actions.drain) {
    metrics_.Rebalance("revoke");
    revoking_since_.insert_or_assign(shard, clock_.Now());
    StopShard(shard, DrainBudget());
  }
  for (int shard : actions.resume) {
    revoking_since_.erase(shard);  // given back: not a revoke any more
    // Still draining: ShardStopped starts it again. Already gone: start it now.
    if (auto token = membership_.TokenOf(shard); token && !shards_.contains(shard)) {
      StartShard({shard, *token});
    }
  }
  for (const ShardGrant& grant : actions.start) {
    metrics_.Rebalance("grant");
    StartShard(grant);
  }
}

void ShardedSubscription::HandleEvent(const Event& event) {
  const auto run = shards_.find(event.shard);
  // An event of a run that has since been replaced says nothing about the current one.
  if (run == shards_.end() || run->second.id != event.run) return;
  switch (event.kind) {
    case Event::Kind::kStarted:
      if (membership_.TokenOf(event.shard) == event.token) {
        membership_.ShardStarted(event.shard);
        metrics_.TakeoverTook(SecondsSince(run->second.granted_at));
      }
      break;
    case Event::Kind::kFenced: {
      metrics_.FencedOp(event.op);
      ++fenced_ops_unreported_[std::string(event.op)];
      // A refused install of the token this member holds is a fence conflict the coordinator
      // repairs (B5.1); any other refusal means a newer owner has the shard.
      const bool install = event.op == "install" && membership_.TokenOf(event.shard) &&
                           *membership_.TokenOf(event.shard) == run->second.token;
      Apply(install ? membership_.ShardInstallRefused(event.shard, event.token)
                    : membership_.ShardFenced(event.shard, event.token));
      break;
    }
    case Event::Kind::kStopped:
      ShardStopped(event.shard);
      break;
  }
}

Millis ShardedSubscription::DrainBudget() const {
  if (!leaving_) return sub_.sharding.drain_timeout;
  // Leaving: the drain, its settling and the leave heartbeat all fit before the deadline.
  const auto left = std::chrono::duration_cast<Millis>(leave_by_ - clock_.Now()) -
                    runtime::kSettleFloor - sub_.sharding.heartbeat_interval;
  return std::clamp(left, Millis(0), sub_.sharding.drain_timeout);
}

void ShardedSubscription::PublishState() {
  metrics_.SetMemberState(MemberStateName(membership_.state()));
  metrics_.SetLeaseRemaining(
      membership_.LeaseValid() ? std::chrono::duration<double>(membership_.LeaseRemaining()).count()
                               : 0);
  size_t owned = 0;
  size_t revoking = 0;
  for (const auto& [shard, state] : membership_.shards()) {
    if (state == ShardState::kStarting || state == ShardState::kActive) ++owned;
    if (state == ShardState::kDraining) ++revoking;
  }
  const std::optional<HeartbeatReply>& last = membership_.last_accepted();
  metrics_.SetShardCounts(owned, last ? last->pending.size() : 0, revoking);
  size_t held = 0;
  for (const auto& [shard, run] : shards_) held += run.loop ? run.loop->held() : 0;
  metrics_.PublishTotals(held);
}

void ShardedSubscription::PublishHeld() {
  size_t held = 0;
  for (const auto& [shard, run] : shards_) held += run.loop ? run.loop->held() : 0;
  held_.store(held, std::memory_order_relaxed);
}

double ShardedSubscription::SecondsSince(SteadyTime since) const {
  return std::chrono::duration<double>(clock_.Now() - since).count();
}

}  // namespace streamcar::sharding
