#include "sidecar/sharding/sharded_subscription.h"

#include <pthread.h>
#include <unistd.h>

#include <random>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/redis/session.h"
#include "sidecar/sharding/heartbeat.h"
#include "sidecar/sharding/heartbeat_script.h"

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
      coordinator_keys_(CoordinatorKeysFor(sub.stream, sub.group)),
      membership_(OptionsOf(sub, member_id_, deps_.consumer_name), lease_clock_) {}

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
  options.slot = redis::KeySlot(coordinator_keys_.meta);
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

size_t ShardedSubscription::held() const { return held_.load(std::memory_order_relaxed); }

void ShardedSubscription::Post(Event event) {
  std::lock_guard lock(mutex_);
  events_.push_back(event);
  wake_.notify_all();
}

std::unique_ptr<config::Subscription> ShardedSubscription::ShardConfig(int shard) const {
  auto shard_sub = std::make_unique<config::Subscription>(sub_);
  shard_sub->stream = ShardKey(sub_.ShardKeyPattern(), shard);
  shard_sub->dead_letter.stream = ShardDeadLetterKey(shard_sub->stream);
  shard_sub->dead_letter.stream_defaulted = false;
  // One entry in flight per shard (B8), or one per key with ordering.key_field.
  if (sub_.ordering.key_field.empty()) shard_sub->handler.concurrency = 1;
  return shard_sub;
}

void ShardedSubscription::StartShard(const ShardGrant& grant) {
  ShardRun& run = shards_[grant.shard];
  if (run.loop) {  // still stopping (given back, or a new grant): start again once stopped
    run.restart_when_done = true;
    run.token = grant.token;
    return;
  }
  run.sub = ShardConfig(grant.shard);
  run.token = grant.token;
  runtime::SubscriptionDeps deps = deps_;
  deps.shard = runtime::SubscriptionDeps::ShardGrant{grant.shard, grant.token, member_id_,
                                                     membership_.member_epoch()};
  deps.group_ready = [this, shard = grant.shard, token = grant.token] {
    Post({Event::Kind::kStarted, shard, token});
  };
  deps.fenced = [this, shard = grant.shard](int64_t installed) {
    Post({Event::Kind::kFenced, shard, installed});
  };
  deps.lease_valid = [this] {
    const int64_t deadline = lease_deadline_ns_.load(std::memory_order_relaxed);
    return deadline != 0 && lease_clock_.Now().time_since_epoch().count() < deadline;
  };
  deps.dead_letter_two_step = false;  // the shard's dead letters share its slot
  run.loop = std::make_unique<runtime::SubscriptionLoop>(*run.sub, std::move(deps));
  if (Status started = run.loop->Start(); !started.ok()) deps_.fatal(started);
  LogInfo("shard granted",
          {{"subscription", sub_.name}, {"shard", grant.shard}, {"fence", grant.token}});
}

void ShardedSubscription::StopShard(int shard, Millis drain_for, bool report_drained) {
  auto it = shards_.find(shard);
  if (it == shards_.end() || !it->second.loop || it->second.stopping) return;
  it->second.stopping = true;
  runtime::SubscriptionLoop* loop = it->second.loop.get();
  stoppers_[shard] = std::thread([this, loop, shard, drain_for, report_drained] {
    const SteadyTime deadline = SteadyClock::now() + drain_for;
    loop->RequestStopIntake();
    loop->JoinIntake();
    loop->WaitForDeliveries(deadline);
    loop->FinishSettling(deadline);
    Post({report_drained ? Event::Kind::kDrained : Event::Kind::kDropped, shard, 0});
  });
}

void ShardedSubscription::Apply(const MemberActions& actions) {
  beat_now_ |= actions.heartbeat_now;
  for (int shard : actions.drop) StopShard(shard, Millis(0), /*report_drained=*/false);
  for (int shard : actions.drain) StopShard(shard, sub_.sharding.drain_timeout, true);
  for (int shard : actions.resume) {
    auto it = shards_.find(shard);
    if (it != shards_.end() && it->second.stopping) it->second.restart_when_done = true;
  }
  for (const ShardGrant& grant : actions.start) StartShard(grant);
}

void ShardedSubscription::HandleEvents() {
  std::deque<Event> events;
  {
    std::lock_guard lock(mutex_);
    events.swap(events_);
  }
  for (const Event& event : events) {
    switch (event.kind) {
      case Event::Kind::kStarted:
        if (membership_.TokenOf(event.shard) == event.token) membership_.ShardStarted(event.shard);
        break;
      case Event::Kind::kFenced: {
        const auto state = membership_.shards().find(event.shard);
        const bool starting =
            state != membership_.shards().end() && state->second == ShardState::kStarting;
        Apply(starting ? membership_.ShardInstallRefused(event.shard, event.token)
                       : membership_.ShardFenced(event.shard, event.token));
        break;
      }
      case Event::Kind::kDrained:
      case Event::Kind::kDropped: {
        // The stopper has finished with the loop: join it, then the loop can go.
        if (auto stopper = stoppers_.find(event.shard); stopper != stoppers_.end()) {
          stopper->second.join();
          stoppers_.erase(stopper);
        }
        auto it = shards_.find(event.shard);
        if (it == shards_.end()) break;
        const bool restart = it->second.restart_when_done;
        const int64_t token = it->second.token;
        shards_.erase(it);
        if (restart) {
          StartShard({event.shard, token});  // given back meanwhile, or granted again
        } else if (event.kind == Event::Kind::kDrained) {
          Apply(membership_.ShardDrained(event.shard));
        }
        break;
      }
    }
  }
}

void ShardedSubscription::Heartbeat() {
  std::vector<ShardProgress> progress;  // the coordinator's `progress` view (status)
  for (const auto& [shard, state] : membership_.shards()) {
    if (state == ShardState::kActive) progress.push_back({shard, "", 0, 0});
  }
  const redis::Command call =
      HeartbeatCommand(coordinator_keys_, membership_.NextRequest(progress));
  auto reply = session_->Run(call);
  if (!reply.ok() && reply.status().IsServerError("NOSCRIPT")) {
    if (session_->Run(HeartbeatScript().Load()).ok()) reply = session_->Run(call);
  }
  if (!reply.ok()) {
    LogWarn("heartbeat failed", {{"subscription", sub_.name}, {"error", reply.status().message()}});
    return;  // the local lease decides what happens meanwhile
  }
  auto parsed = ParseHeartbeatReply(reply->view());
  if (!parsed.ok()) {
    LogWarn("heartbeat reply unreadable",
            {{"subscription", sub_.name}, {"error", parsed.status().message()}});
    return;
  }
  if (parsed->status != HeartbeatStatus::kOk) {
    LogInfo("heartbeat", {{"subscription", sub_.name},
                          {"status", std::string(HeartbeatStatusName(parsed->status))},
                          {"detail", parsed->detail}});
  }
  const MemberActions actions = membership_.OnReply(*parsed);
  lease_deadline_ns_.store(
      membership_.LeaseValid()
          ? (lease_clock_.Now() + membership_.LeaseRemaining()).time_since_epoch().count()
          : 0,
      std::memory_order_relaxed);
  if (ready_ && membership_.last_accepted()) std::exchange(ready_, nullptr)();
  Apply(actions);
}

void ShardedSubscription::Run() {
  StopSignal stop;
  bool leaving = false;
  SteadyTime next_beat = SteadyClock::now();
  while (true) {
    HandleEvents();
    Apply(membership_.CheckLease());
    {
      std::unique_lock lock(mutex_);
      if (leave_requested_ && !leaving) {
        leaving = true;
        lock.unlock();
        Apply(membership_.Leave());
        next_beat = SteadyClock::now();
        lock.lock();
      }
      if (leaving &&
          (membership_.state() == MemberState::kLeft || SteadyClock::now() >= leave_deadline_)) {
        break;
      }
      if (std::exchange(beat_now_, false)) next_beat = SteadyClock::now();
      wake_.wait_until(lock, next_beat,
                       [&] { return !events_.empty() || (leave_requested_ && !leaving); });
      if (!events_.empty() && SteadyClock::now() < next_beat) continue;
    }
    if (!session_->connected()) {
      Millis retry_in{0};
      if (!session_->ConnectOnce(&retry_in).ok()) {
        next_beat = SteadyClock::now() + std::max(retry_in, Millis(100));
        continue;
      }
    }
    Heartbeat();
    next_beat = SteadyClock::now() + membership_.NextHeartbeatDelay(Jitter());
    size_t held = 0;
    for (const auto& [shard, run] : shards_) held += run.loop ? run.loop->held() : 0;
    held_.store(held, std::memory_order_relaxed);
  }
  // Leaving or past the deadline: every loop still running is dropped.
  for (auto& [shard, run] : shards_) StopShard(shard, Millis(0), false);
  for (auto& [shard, stopper] : stoppers_) {
    if (stopper.joinable()) stopper.join();
  }
  stoppers_.clear();
  shards_.clear();
  (void)stop;
}

}  // namespace streamcar::sharding
