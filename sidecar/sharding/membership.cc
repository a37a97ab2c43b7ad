#include "sidecar/sharding/membership.h"

#include <algorithm>
#include <array>

namespace streamcar::sharding {
namespace {

// The local lease's share of the session (B6): it ends first as long as the member's clock runs
// no more than 25 % slower than Redis's.
constexpr double kLeaseShare = 0.8;

bool Held(ShardState state) { return state != ShardState::kRevoked; }

}  // namespace

std::string_view MemberStateName(MemberState state) {
  static constexpr std::array<std::string_view, 7> kNames = {
      "joining", "stable", "reconciling", "drain_only", "lost", "leaving", "left"};
  return kNames[static_cast<size_t>(state)];
}

Membership::Membership(MembershipOptions options, const Clock& lease_clock)
    : options_(std::move(options)),
      lease_clock_(lease_clock),
      heartbeat_interval_(options_.heartbeat_interval) {}

std::optional<int64_t> Membership::TokenOf(int shard) const {
  auto it = shards_.find(shard);
  if (it == shards_.end() || !Held(it->second)) return std::nullopt;
  return tokens_.at(shard);
}

HeartbeatRequest Membership::NextRequest(std::vector<ShardProgress> progress) {
  sent_at_ = lease_clock_.Now();
  HeartbeatRequest request;
  request.member_id = options_.member_id;
  request.instance_id = options_.instance_id;
  request.shard_count = options_.shard_count;
  request.session_timeout = options_.session_timeout;
  request.rebalance_timeout = options_.rebalance_timeout;
  request.initial_delay = options_.initial_delay;
  request.min_assignment_interval = options_.min_assignment_interval;
  request.heartbeat_interval = options_.heartbeat_interval;
  request.static_takeover_wait = options_.static_takeover_wait;
  request.stall_timeout = options_.stall_timeout;
  request.revoke_stalled = options_.revoke_stalled;
  request.pod = options_.pod;
  request.host = options_.host;
  request.metadata_version = metadata_version_;
  const bool draining_left =
      std::ranges::any_of(shards_, [](const auto& shard) { return Held(shard.second); });
  if (state_ == MemberState::kLeaving && !draining_left) {
    // Everything is drained: leave. A static member keeps its target reserved (-2).
    request.member_epoch = options_.instance_id.empty() ? kLeaveEpoch : kStaticLeaveEpoch;
    leave_sent_ = true;
    return request;
  }
  request.member_epoch = epoch_;
  for (const auto& [shard, state] : shards_) {
    if (Held(state)) request.owned.push_back(shard);
    if (state == ShardState::kDraining)
      request.revoking.emplace_back(shard, RevokeState::kDraining);
    if (state == ShardState::kRevoked) request.revoking.emplace_back(shard, RevokeState::kRevoked);
  }
  request.fence_conflicts = conflicts_;
  request.progress = std::move(progress);
  return request;
}

void Membership::Accept(const HeartbeatReply& reply) {
  last_accepted_ = reply;
  refusals_ = 0;
  refused_with_.reset();
  metadata_version_ = reply.metadata_version;
  if (reply.heartbeat_interval.count() > 0) heartbeat_interval_ = reply.heartbeat_interval;
  const Millis session =
      reply.session_timeout.count() > 0 ? reply.session_timeout : options_.session_timeout;
  lease_deadline_ = sent_at_ + std::chrono::duration_cast<Millis>(session * kLeaseShare);
  // The request that this reply answers reported these; the script has applied them.
  std::erase_if(shards_, [](const auto& shard) { return shard.second == ShardState::kRevoked; });
  conflicts_.clear();
}

void Membership::DrainUnlisted(const std::map<int, int64_t>& listed, MemberActions* actions) {
  for (auto& [shard, state] : shards_) {
    if ((state == ShardState::kActive || state == ShardState::kStarting) &&
        !listed.contains(shard)) {
      state = ShardState::kDraining;
      actions->drain.push_back(shard);
    }
  }
}

MemberActions Membership::OnReply(const HeartbeatReply& reply) {
  MemberActions actions;
  if (leave_sent_) {
    // The leave's own answer (OK), or a refusal that changes nothing: the member is gone.
    state_ = MemberState::kLeft;
    shards_.clear();
    tokens_.clear();
    return actions;
  }
  std::map<int, int64_t> listed;
  for (const ShardGrant& grant : reply.assigned) listed[grant.shard] = grant.token;
  switch (reply.status) {
    case HeartbeatStatus::kOk:
    case HeartbeatStatus::kRevokePending:
    case HeartbeatStatus::kSyncMetadata: {
      Accept(reply);
      const bool ok = reply.status == HeartbeatStatus::kOk;
      if (ok) epoch_ = reply.member_epoch;
      DrainUnlisted(listed, &actions);
      for (const auto& [shard, token] : listed) {
        auto held = shards_.find(shard);
        if (held != shards_.end() && tokens_[shard] != token) {
          // Another grant of a shard still held under an older one: the old work is void.
          actions.drop.push_back(shard);
          shards_.erase(held);
          held = shards_.end();
        }
        if (held == shards_.end()) {
          if (ok && !Leaving()) {
            shards_[shard] = ShardState::kStarting;
            tokens_[shard] = token;
            actions.start.push_back({shard, token});
          }
        } else if (held->second == ShardState::kDraining && !Leaving()) {
          // The target gave it back, same token. A new run takes it over again (its install and
          // claim_all): ACTIVE once that is done (ShardStarted), as after a grant (B7).
          held->second = ShardState::kStarting;
          actions.resume.push_back(shard);
        }
      }
      if (!Leaving()) {
        state_ = ok ? MemberState::kReconciling : MemberState::kDrainOnly;
        UpdateState();
      }
      actions.heartbeat_now = reply.status == HeartbeatStatus::kSyncMetadata;
      break;
    }
    case HeartbeatStatus::kFencedMemberEpoch:
    case HeartbeatStatus::kUnknownMemberId:
      actions = DropAll();
      epoch_ = kJoinEpoch;
      conflicts_.clear();
      lease_deadline_.reset();
      refusals_ = 0;
      refused_with_.reset();
      if (!Leaving()) state_ = MemberState::kJoining;
      actions.heartbeat_now = true;
      break;
    case HeartbeatStatus::kUnreleasedInstanceId:
    case HeartbeatStatus::kInvalidRequest:
      // Nothing is held without an accepted join: back off (NextHeartbeatDelay) and ask again.
      if (refusals_++ == 0) refused_since_ = lease_clock_.Now();
      refused_with_ = reply.status;
      break;
  }
  std::ranges::sort(actions.drop);
  return actions;
}

// STABLE when every shard is active, RECONCILING while some start or drain. DRAIN_ONLY, LOST,
// JOINING and LEAVING change only on a reply or a lease check.
void Membership::UpdateState() {
  if (state_ != MemberState::kStable && state_ != MemberState::kReconciling) return;
  const bool moving = std::ranges::any_of(
      shards_, [](const auto& shard) { return shard.second != ShardState::kActive; });
  state_ = moving ? MemberState::kReconciling : MemberState::kStable;
}

Millis Membership::NextHeartbeatDelay(double jitter) const {
  if (refusals_ > 0) {
    const Millis cap = refused_with_ == HeartbeatStatus::kInvalidRequest
                           ? std::max(Millis(60000), heartbeat_interval_)
                           : std::max(options_.session_timeout, heartbeat_interval_);
    // Never sooner than one interval: full jitter on top of it, doubling per refusal.
    const Millis grown =
        std::min(cap, heartbeat_interval_ * (int64_t{1} << std::min(refusals_ - 1, 16)));
    return std::max(heartbeat_interval_,
                    std::chrono::duration_cast<Millis>(grown * (0.5 + 0.5 * jitter)));
  }
  return std::chrono::duration_cast<Millis>(heartbeat_interval_ * (0.8 + 0.2 * jitter));
}

Millis Membership::RefusedFor() const {
  if (refusals_ == 0) return Millis(0);
  return std::chrono::duration_cast<Millis>(lease_clock_.Now() - refused_since_);
}

bool Membership::LeaseValid() const {
  return lease_deadline_.has_value() && lease_clock_.Now() < *lease_deadline_;
}

Millis Membership::LeaseRemaining() const {
  if (!lease_deadline_) return Millis(0);
  return std::max(Millis(0),
                  std::chrono::duration_cast<Millis>(*lease_deadline_ - lease_clock_.Now()));
}

MemberActions Membership::CheckLease() {
  if (!lease_deadline_ || LeaseValid()) return {};
  // Redis has not accepted a heartbeat for 0.8 x the session: the coordinator may already have
  // given the shards away. Stop; rejoin once Redis answers.
  MemberActions actions = DropAll();
  lease_deadline_.reset();
  epoch_ = kJoinEpoch;
  conflicts_.clear();
  if (!Leaving()) state_ = MemberState::kLost;
  actions.heartbeat_now = true;
  return actions;
}

MemberActions Membership::DropAll() {
  MemberActions actions;
  for (const auto& [shard, state] : shards_) {
    if (Held(state)) actions.drop.push_back(shard);
  }
  shards_.clear();
  tokens_.clear();
  return actions;
}

void Membership::ShardStarted(int shard) {
  auto it = shards_.find(shard);
  if (it == shards_.end() || it->second != ShardState::kStarting) return;
  it->second = ShardState::kActive;
  UpdateState();
}

MemberActions Membership::ShardInstallRefused(int shard, int64_t installed) {
  MemberActions actions;
  if (shards_.erase(shard) == 0) return actions;
  tokens_.erase(shard);
  conflicts_.emplace_back(shard, installed);
  actions.drop.push_back(shard);  // its loop, fenced off at the install, must go too
  actions.heartbeat_now = true;
  UpdateState();
  return actions;
}

MemberActions Membership::ShardFenced(int shard, int64_t installed) {
  (void)installed;  // a newer owner installed it: nothing to report, the coordinator knows
  MemberActions actions;
  auto it = shards_.find(shard);
  if (it == shards_.end() || !Held(it->second)) return actions;
  shards_.erase(it);
  tokens_.erase(shard);
  actions.drop.push_back(shard);
  actions.heartbeat_now = true;
  UpdateState();
  return actions;
}

MemberActions Membership::ShardDrained(int shard) {
  MemberActions actions;
  auto it = shards_.find(shard);
  if (it == shards_.end() || it->second != ShardState::kDraining) return actions;
  it->second = ShardState::kRevoked;
  actions.heartbeat_now = true;
  return actions;
}

MemberActions Membership::Leave() {
  MemberActions actions;
  if (Leaving()) return actions;
  state_ = MemberState::kLeaving;
  for (auto& [shard, state] : shards_) {
    if (state == ShardState::kActive || state == ShardState::kStarting) {
      state = ShardState::kDraining;
      actions.drain.push_back(shard);
    }
  }
  actions.heartbeat_now = true;
  return actions;
}

}  // namespace streamcar::sharding
