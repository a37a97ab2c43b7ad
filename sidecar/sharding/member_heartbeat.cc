// The member's heartbeat (SHARDING.md B4, B6): the request with the shards' progress, sent over
// the HeartbeatLink, and what its answer changes: metrics, readiness, logs, the Membership's
// actions and the lease the shard loops check before each POST. Part of ShardedSubscription.

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/redis/acl_refusal.h"
#include "sidecar/sharding/heartbeat.h"
#include "sidecar/sharding/sharded_subscription.h"

namespace streamcar::sharding {
namespace {

// Why a heartbeat's answer takes this member's shards away (streamcar_coord_fenced_total). An
// expired member hears UNKNOWN_MEMBER_ID: whether its session or a rebalance deadline expired is
// in the coordinator's events stream, not in the reply.
std::optional<std::string_view> FencedReason(const HeartbeatReply& reply) {
  if (reply.status == HeartbeatStatus::kUnknownMemberId) return "unknown_member";
  if (reply.status != HeartbeatStatus::kFencedMemberEpoch) return std::nullopt;
  if (reply.detail.find("stale ownership") != std::string::npos) return "stale_ownership";
  return "stale_epoch";
}

}  // namespace

void ShardedSubscription::SendBeat() {
  if (link_->busy()) return;  // its answer decides when the next one goes
  const SteadyTime sent = clock_.Now();
  // A beat is carried through redirects and transient states for a command timeout, as the
  // blocking session carried it. Finish's leave beat, when Redis is out of reach, waits at most
  // one connect for the connection to come back (the old blocking member connected once, then
  // sent): a leave the coordinator hears frees the shards at once, not after a session timeout.
  const bool one_try = finishing_ && !link_->connected();
  const SteadyTime deadline =
      sent + (one_try ? std::min(deps_.redis.connect_timeout, deps_.redis.command_timeout)
                      : deps_.redis.command_timeout);
  link_->Beat(HeartbeatCommand(coordinator_keys_, NextRequest()), deadline,
              [this, sent](StatusOr<redis::Reply> reply) { BeatAnswered(reply, sent); });
}

HeartbeatRequest ShardedSubscription::NextRequest() {
  std::vector<ShardProgress> progress;  // the coordinator's `progress` view (status)
  const SteadyTime now = clock_.Now();
  for (const auto& [shard, state] : membership_.shards()) {
    const auto run = shards_.find(shard);
    if (state != ShardState::kActive || run == shards_.end() || !run->second.loop) continue;
    const auto report = run->second.loop->progress();
    ShardProgress item{.shard = shard,
                       .last_acked_id = report.last_settled_id,
                       .in_flight = static_cast<int64_t>(run->second.loop->held()),
                       .pending = report.pending.value_or(0),
                       .waiting = report.Waiting(static_cast<int64_t>(run->second.loop->held()))};
    if (report.settled_at) {
      item.acked_ago = std::chrono::duration_cast<Millis>(now - *report.settled_at);
    }
    progress.push_back(std::move(item));
  }
  HeartbeatRequest request = membership_.NextRequest(std::move(progress));
  request.fenced_ops = fenced_ops_unreported_;
  return request;
}

void ShardedSubscription::BeatAnswered(const StatusOr<redis::Reply>& reply, SteadyTime sent) {
  const bool answered = OnBeatAnswer(reply, sent);
  if (answered) {
    unreachable_since_ = SteadyTime::max();
  } else if (unreachable_since_ == SteadyTime::max()) {
    unreachable_since_ = sent;
  }
  PublishHeld();
  if (finishing_) return FinishAfterBeat();
  beat_timer_->ArmAt(clock_.Now() + membership_.NextHeartbeatDelay(UnitRandom()));
  // What came while the beat was out, now that its answer is applied.
  for (auto& work : std::exchange(deferred_, {})) work();
  Tick();  // a heartbeat the answer (or an event) asked for at once goes now
}

bool ShardedSubscription::OnBeatAnswer(const StatusOr<redis::Reply>& reply, SteadyTime sent) {
  // The script ran, so it recorded them (whatever its answer).
  if (reply.ok()) fenced_ops_unreported_.clear();
  auto parsed =
      reply.ok() ? ParseHeartbeatReply(reply->view()) : StatusOr<HeartbeatReply>(reply.status());
  // A beat that never reached Redis (out of reach for its whole deadline) is not timed: the
  // duration histogram is Redis latency eating the lease (SHARDING.md C1), not an outage's length;
  // the connection's own counters and logs tell the outage.
  if (reply.ok() || link_->last_reached_redis()) {
    metrics_.Heartbeat(parsed.ok() ? HeartbeatStatusName(parsed->status) : "error",
                       SecondsSince(sent));
  }
  if (!reply.ok() && redis::IsAclRefusal(reply.status())) {
    // As in plain mode: the ACL user may not run what the heartbeat script runs (docs/sharding.md
    // lists the rules); no retry fixes that, and the member would never join.
    deps_.fatal(Status(StatusCode::kFatal, "subscription " + sub_.name +
                                               ": the Redis ACL user may not run a command "
                                               "the coordinator's heartbeat needs (" +
                                               reply.status().message() + ")"));
    return false;
  }
  if (!reply.ok()) {
    // While Redis is out of reach the connection logs each backoff step: a line per beat would
    // only repeat it.
    if (link_->connected()) {
      LogWarn("heartbeat failed",
              {{"subscription", sub_.name}, {"error", reply.status().message()}});
    }
    return false;  // the local lease decides what happens meanwhile
  }
  if (!parsed.ok()) {
    LogWarn("heartbeat reply unreadable",
            {{"subscription", sub_.name}, {"error", parsed.status().message()}});
    return true;
  }
  LogReply(*parsed);
  AcceptReply(*parsed);
  return true;
}

void ShardedSubscription::LogReply(const HeartbeatReply& reply) {
  if (reply.status == HeartbeatStatus::kInvalidRequest) {
    // The group was made with another configuration (shard count, schema): retrying cannot fix
    // it, a restart with the group's configuration does. Logged once per backoff step.
    LogError("coordinator refuses this member's configuration; not ready",
             {{"subscription", sub_.name}, {"detail", reply.detail}});
    if (deps_.readiness != nullptr) {
      deps_.readiness->SetRefused(sub_.name,
                                  "the coordinator refuses its configuration: " + reply.detail);
    }
  } else if (reply.status == HeartbeatStatus::kUnreleasedInstanceId) {
    // Another live process holds the instance id; it leaves or expires within a session.
    const bool overdue = membership_.RefusedFor() >= sub_.sharding.session_timeout * 2;
    (overdue ? LogError : LogWarn)("instance id held by another member; waiting",
                                   {{"subscription", sub_.name},
                                    {"instance_id", sub_.sharding.instance_id},
                                    {"detail", reply.detail}});
  } else if (reply.status != HeartbeatStatus::kOk) {
    LogInfo("heartbeat", {{"subscription", sub_.name},
                          {"status", std::string(HeartbeatStatusName(reply.status))},
                          {"detail", reply.detail}});
  }
}

void ShardedSubscription::AcceptReply(const HeartbeatReply& reply) {
  // A member whose lease ran out was counted then (local_lease): its rejoin's refusal is the
  // same loss.
  if (auto reason = FencedReason(reply); reason && membership_.state() != MemberState::kLost) {
    metrics_.Fenced(*reason);
  }
  const MemberActions actions = membership_.OnReply(reply);
  metrics_.SetEpochs(membership_.member_epoch(), reply.group_epoch, reply.assignment_epoch);
  metrics_.SetGroup(reply.members, reply.unowned_shards,
                    std::chrono::duration<double>(reply.unowned_oldest).count());
  // The shards this member runs, as the coordinator judged them (B6.1): a refusal judges none.
  for (const auto& run : shards_) {
    const int shard = run.first;
    metrics_.SetShardStalled(shard, std::ranges::find(reply.stalled, shard) != reply.stalled.end());
  }
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
}

}  // namespace streamcar::sharding
