#include "sidecar/sharding/sharded_subscription.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <random>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/redis/acl_refusal.h"
#include "sidecar/redis/session.h"
#include "sidecar/sharding/heartbeat.h"
#include "sidecar/sharding/heartbeat_script.h"
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
          .pod = pod,
          .host = host};
}

double SecondsSince(SteadyTime since) {
  return std::chrono::duration<double>(SteadyClock::now() - since).count();
}

// Why a heartbeat's answer takes this member's shards away (streamcar_coord_fenced_total). An
// expired member hears UNKNOWN_MEMBER_ID: whether its session or a rebalance deadline expired is
// in the coordinator's events stream, not in the reply.
std::optional<std::string_view> FencedReason(const HeartbeatReply& reply) {
  if (reply.status == HeartbeatStatus::kUnknownMemberId) return "unknown_member";
  if (reply.status != HeartbeatStatus::kFencedMemberEpoch) return std::nullopt;
  if (reply.detail.find("stale ownership") != std::string::npos) return "stale_ownership";
  return "stale_epoch";
}

double Jitter() {
  thread_local std::mt19937 random{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(random);
}

}  // namespace

ShardedSubscription::ShardedSubscription(const config::Subscription& sub,
                                         runtime::SubscriptionDeps deps, std::string member_id,
                                         std::function<void()> ready)
    : sub_(sub),
      deps_(std::move(deps)),
      ready_(std::move(ready)),
      member_id_(std::move(member_id)),
      metrics_(deps_.metrics->ForMember(sub.name)),
      coordinator_keys_(keys::CoordinatorKeysFor(sub.stream, sub.group)),
      membership_(OptionsOf(sub, member_id_, deps_.consumer_name), lease_clock_) {
  std::array<std::string_view, kHeartbeatStatuses.size()> statuses;
  std::ranges::transform(kHeartbeatStatuses, statuses.begin(), HeartbeatStatusName);
  metrics_.DeclareHeartbeatStatuses(statuses);
}

ShardedSubscription::~ShardedSubscription() {
  if (thread_.joinable()) {
    Leave(SteadyClock::now());
    thread_.join();
  }
  for (auto& [shard, stopper] : stoppers_) {
    if (stopper.joinable()) stopper.join();
  }
}

Status ShardedSubscription::Start() {
  redis::ConnectionOptions options = deps_.redis;
  options.client_name = "streamcar:" + deps_.consumer_name + ":" + sub_.name + ":member";
  options.slot = keys::KeySlot(coordinator_keys_.meta);
  session_ = std::make_unique<redis::Session>(options, sub_.name + "/member", deps_.redis_health);
  thread_ = std::thread([this] {
    const std::string name = ("sc:m:" + sub_.name).substr(0, 15);
    pthread_setname_np(pthread_self(), name.c_str());
    Run();
  });
  return Status::Ok();
}

void ShardedSubscription::Leave(SteadyTime deadline) {
  std::lock_guard lock(mutex_);
  if (leave_requested_) return;
  leave_requested_ = true;
  leave_deadline_ = deadline;
  wake_.notify_all();
}

void ShardedSubscription::Join() {
  if (thread_.joinable()) thread_.join();
}

size_t ShardedSubscription::held() const { return held_.load(std::memory_order_relaxed); }

void ShardedSubscription::Post(Event event) {
  std::lock_guard lock(mutex_);
  events_.push_back(event);
  wake_.notify_all();
}

void ShardedSubscription::StartShard(const ShardGrant& grant) {
  if (auto it = shards_.find(grant.shard); it != shards_.end()) {
    // The previous run is still there (stopping, or an old grant): ShardStopped starts the new
    // one once it has ended.
    StopShard(grant.shard, Millis(0));
    return;
  }
  ShardRun& run = shards_[grant.shard];
  run.id = next_run_id_++;
  run.sub = std::make_unique<config::Subscription>(ShardSubscription(sub_, grant.shard));
  run.granted_at = SteadyClock::now();
  run.token = grant.token;
  metrics_.SetShardOwned(grant.shard, true, grant.token);
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
  deps.gates.push_back([this, cut_short = run.cut_short] {
    return std::make_unique<LeaseGate>(lease_deadline_ns_, lease_clock_, cut_short);
  });
  deps.dead_letter_two_step = false;  // the shard's dead letters share its slot
  run.loop = std::make_unique<runtime::SubscriptionLoop>(*run.sub, std::move(deps));
  if (Status started = run.loop->Start(); !started.ok()) deps_.fatal(started);
  LogInfo("shard granted",
          {{"subscription", sub_.name}, {"shard", grant.shard}, {"fence", grant.token}});
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
                                  deadline = SteadyClock::now() + drain_for] {
    loop->RequestStopIntake();
    loop->JoinIntake();
    loop->WaitForDeliveries(deadline, cut_short.get());
    // Acks of finished work still go, through the fence: a newer owner's token refuses them, and
    // without one they save the next owner a redelivery. Reads never POSTed are taken back. A
    // drop gives this the floor only, not what is left of a drain.
    const SteadyTime floor = SteadyClock::now() + runtime::kSettleFloor;
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
    revoking_since_.insert_or_assign(shard, SteadyClock::now());
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

void ShardedSubscription::HandleEvents() {
  std::deque<Event> events;
  {
    std::lock_guard lock(mutex_);
    events.swap(events_);
  }
  for (const Event& event : events) {
    const auto run = shards_.find(event.shard);
    // An event of a run that has since been replaced says nothing about the current one.
    if (run == shards_.end() || run->second.id != event.run) continue;
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
}

bool ShardedSubscription::Heartbeat() {
  std::vector<ShardProgress> progress;  // the coordinator's `progress` view (status)
  const SteadyTime now = SteadyClock::now();
  for (const auto& [shard, state] : membership_.shards()) {
    const auto run = shards_.find(shard);
    if (state != ShardState::kActive || run == shards_.end() || !run->second.loop) continue;
    const auto report = run->second.loop->progress();
    ShardProgress item{.shard = shard,
                       .last_acked_id = report.last_settled_id,
                       .in_flight = static_cast<int64_t>(run->second.loop->held()),
                       .pending = report.pending.value_or(0)};
    if (report.settled_at) {
      item.acked_ago = std::chrono::duration_cast<Millis>(now - *report.settled_at);
    }
    progress.push_back(std::move(item));
  }
  HeartbeatRequest request = membership_.NextRequest(progress);
  request.fenced_ops = fenced_ops_unreported_;
  const redis::Command call = HeartbeatCommand(coordinator_keys_, request);
  const SteadyTime sent = now;
  auto reply = session_->Run(call);
  if (!reply.ok() && reply.status().IsServerError("NOSCRIPT")) {
    auto loaded = session_->Run(HeartbeatScript().Load());
    // A refused SCRIPT LOAD is the refusal to report (below), not the NOSCRIPT it leaves.
    reply = loaded.ok() ? session_->Run(call) : StatusOr<redis::Reply>(loaded.status());
  }
  // The script ran, so it recorded them (whatever its answer).
  if (reply.ok()) fenced_ops_unreported_.clear();
  auto parsed =
      reply.ok() ? ParseHeartbeatReply(reply->view()) : StatusOr<HeartbeatReply>(reply.status());
  metrics_.Heartbeat(parsed.ok() ? HeartbeatStatusName(parsed->status) : "error",
                     SecondsSince(sent));
  if (!reply.ok() && redis::IsAclRefusal(reply.status())) {
    // As in plain mode: the ACL user may not run what the heartbeat script runs (README lists
    // the rules); no retry fixes that, and the member would never join.
    deps_.fatal(Status(StatusCode::kFatal, "subscription " + sub_.name +
                                               ": the Redis ACL user may not run a command "
                                               "the coordinator's heartbeat needs (" +
                                               reply.status().message() + ")"));
    return false;
  }
  if (!reply.ok()) {
    LogWarn("heartbeat failed", {{"subscription", sub_.name}, {"error", reply.status().message()}});
    return false;  // the local lease decides what happens meanwhile
  }
  if (!parsed.ok()) {
    LogWarn("heartbeat reply unreadable",
            {{"subscription", sub_.name}, {"error", parsed.status().message()}});
    return true;
  }
  const std::string status_name(HeartbeatStatusName(parsed->status));
  if (parsed->status == HeartbeatStatus::kInvalidRequest) {
    // The group was made with another configuration (shard count, schema): retrying cannot fix
    // it, a restart with the group's configuration does. Logged once per backoff step.
    LogError("coordinator refuses this member's configuration; not ready",
             {{"subscription", sub_.name}, {"detail", parsed->detail}});
    if (deps_.readiness != nullptr) {
      deps_.readiness->SetRefused(sub_.name,
                                  "the coordinator refuses its configuration: " + parsed->detail);
    }
  } else if (parsed->status == HeartbeatStatus::kUnreleasedInstanceId) {
    // Another live process holds the instance id; it leaves or expires within a session.
    const bool overdue = membership_.RefusedFor() >= sub_.sharding.session_timeout * 2;
    (overdue ? LogError : LogWarn)("instance id held by another member; waiting",
                                   {{"subscription", sub_.name},
                                    {"instance_id", sub_.sharding.instance_id},
                                    {"detail", parsed->detail}});
  } else if (parsed->status != HeartbeatStatus::kOk) {
    LogInfo("heartbeat",
            {{"subscription", sub_.name}, {"status", status_name}, {"detail", parsed->detail}});
  }
  // A member whose lease ran out was counted then (local_lease): its rejoin's refusal is the
  // same loss.
  if (auto reason = FencedReason(*parsed); reason && membership_.state() != MemberState::kLost) {
    metrics_.Fenced(*reason);
  }
  const MemberActions actions = membership_.OnReply(*parsed);
  metrics_.SetEpochs(membership_.member_epoch(), parsed->group_epoch, parsed->assignment_epoch);
  metrics_.SetGroup(parsed->members, parsed->unowned_shards,
                    std::chrono::duration<double>(parsed->unowned_oldest).count());
  lease_deadline_ns_.store(
      membership_.LeaseValid()
          ? (lease_clock_.Now() + membership_.LeaseRemaining()).time_since_epoch().count()
          : 0,
      std::memory_order_release);
  if (membership_.refusals() == 0 && deps_.readiness != nullptr) {
    deps_.readiness->SetRefused(sub_.name, "");
  }
  if (ready_ && membership_.last_accepted()) std::exchange(ready_, nullptr)();
  Apply(actions);
  return true;
}

void ShardedSubscription::Run() {
  StopSignal stop;
  watchdog_ = deps_.watchdog->Register(
      sub_.name + "/member",
      (sub_.sharding.heartbeat_interval + deps_.redis.command_timeout) * 2 + Millis(30000));
  bool& leaving = leaving_;
  // Since when no heartbeat has been answered (max: the last one was).
  constexpr SteadyTime kAnswered = SteadyTime::max();
  SteadyTime unreachable_since = kAnswered;
  const Millis unreachable_for_leave =
      sub_.sharding.heartbeat_interval + deps_.redis.command_timeout;
  SteadyTime next_beat = SteadyClock::now();
  while (true) {
    watchdog_->Beat();
    HandleEvents();
    const bool was_lost = membership_.state() == MemberState::kLost;
    Apply(membership_.CheckLease());
    if (!was_lost && membership_.state() == MemberState::kLost) metrics_.Fenced("local_lease");
    PublishState();
    {
      std::unique_lock lock(mutex_);
      if (leave_requested_ && !leaving) {
        leaving = true;
        leave_by_ = leave_deadline_;
        lock.unlock();
        Apply(membership_.Leave());
        next_beat = SteadyClock::now();
        lock.lock();
      }
      // Leaving with every loop ended and Redis out of reach for a while (a heartbeat interval
      // and a command timeout: not one refused connect during a failover): the leave cannot be
      // told and nothing is left to drain, so waiting out the deadline would only hold the pod
      // (the coordinator expires this member after its session). A heartbeat due at once (a
      // drain just reported) is tried first.
      const bool unreachable = unreachable_since != kAnswered &&
                               SteadyClock::now() - unreachable_since >= unreachable_for_leave;
      if (leaving &&
          (membership_.state() == MemberState::kLeft || SteadyClock::now() >= leave_deadline_ ||
           (shards_.empty() && unreachable && !beat_now_))) {
        break;
      }
      if (std::exchange(beat_now_, false)) next_beat = SteadyClock::now();
      wake_.wait_until(lock, NextWake(next_beat, leaving),
                       [&] { return !events_.empty() || (leave_requested_ && !leaving); });
      if (SteadyClock::now() < next_beat) continue;  // an event, the lease or the deadline
    }
    if (!session_->connected()) {
      Millis retry_in{0};
      if (!session_->ConnectOnce(&retry_in).ok()) {
        if (unreachable_since == kAnswered) unreachable_since = SteadyClock::now();
        next_beat = SteadyClock::now() + std::max(retry_in, Millis(100));
        continue;
      }
    }
    if (Heartbeat()) {
      unreachable_since = kAnswered;
    } else if (unreachable_since == kAnswered) {
      unreachable_since = SteadyClock::now();
    }
    next_beat = SteadyClock::now() + membership_.NextHeartbeatDelay(Jitter());
    size_t held = 0;
    for (const auto& [shard, run] : shards_) held += run.loop ? run.loop->held() : 0;
    held_.store(held, std::memory_order_relaxed);
  }
  // Leaving or past the deadline: every loop still running is dropped.
  for (auto& [shard, run] : shards_) StopShard(shard, Millis(0));
  for (auto& [shard, stopper] : stoppers_) {
    if (stopper.joinable()) stopper.join();
  }
  stoppers_.clear();
  size_t held = 0;  // what the ended loops leave pending
  for (const auto& [shard, run] : shards_) held += run.loop ? run.loop->held() : 0;
  held_.store(held, std::memory_order_relaxed);
  shards_.clear();
  if (leaving && membership_.state() != MemberState::kLeft) {
    // The deadline came first. Every loop has ended, so what still drained is done with, and the
    // coordinator hears the leave now rather than after a session timeout (best effort).
    const std::map<int, ShardState> left = membership_.shards();
    for (const auto& [shard, state] : left) {
      if (state == ShardState::kDraining) membership_.ShardDrained(shard);
    }
    Millis retry_in{0};
    if (session_->connected() || session_->ConnectOnce(&retry_in).ok()) Heartbeat();
  }
  watchdog_->Retire();
  (void)stop;
}

Millis ShardedSubscription::DrainBudget() const {
  if (!leaving_) return sub_.sharding.drain_timeout;
  // Leaving: the drain, its settling and the leave heartbeat all fit before the deadline.
  const auto left = std::chrono::duration_cast<Millis>(leave_by_ - SteadyClock::now()) -
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

SteadyTime ShardedSubscription::NextWake(SteadyTime next_beat, bool leaving) const {
  SteadyTime wake = next_beat;
  // CheckLease must drop the shards when the lease ends, not at the next heartbeat.
  if (membership_.LeaseValid()) {
    wake = std::min(wake, SteadyClock::now() + membership_.LeaseRemaining() + Millis(1));
  }
  if (leaving) wake = std::min(wake, leave_deadline_);
  return wake;
}

}  // namespace streamcar::sharding
