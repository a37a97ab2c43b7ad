#include "sidecar/admin/member_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <array>

namespace streamcar::admin {
namespace {

// Heartbeats take a Redis round trip and a script run: milliseconds, seconds when Redis stalls.
const prometheus::Histogram::BucketBoundaries kHeartbeatBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
// Revokes and takeovers last from a moment to drain_timeout (default 30 s) and beyond.
const prometheus::Histogram::BucketBoundaries kRebalanceBuckets = {
    0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};

constexpr std::array<std::string_view, 6> kMemberStates = {"joining",    "stable", "reconciling",
                                                           "drain_only", "lost",   "leaving"};

template <typename Builder>
auto* Registered(Builder builder, const char* name, const char* help,
                 prometheus::Registry& registry) {
  return &builder.Name(name).Help(help).Register(registry);
}

}  // namespace

MemberFamilies RegisterMemberFamilies(prometheus::Registry& r) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  MemberFamilies f{};
  f.heartbeats = Registered(BuildCounter(), "streamcar_coord_heartbeats_total",
                            "Coordinator heartbeats by answer (error: no answer)", r);
  f.heartbeat_duration = Registered(BuildHistogram(), "streamcar_coord_heartbeat_duration_seconds",
                                    "Round trip of one coordinator heartbeat", r);
  f.lease_remaining = Registered(BuildGauge(), "streamcar_coord_lease_remaining_seconds",
                                 "Time left on the local lease (0: none; below one heartbeat "
                                 "interval the member is about to fence itself)",
                                 r);
  f.member_state = Registered(BuildGauge(), "streamcar_coord_member_state",
                              "1 for this member's state (SHARDING.md B7), 0 for the others", r);
  f.member_epoch =
      Registered(BuildGauge(), "streamcar_coord_member_epoch", "This member's epoch", r);
  f.group_epoch = Registered(BuildGauge(), "streamcar_coord_group_epoch",
                             "The group epoch of the last accepted heartbeat", r);
  f.assignment_epoch = Registered(BuildGauge(), "streamcar_coord_assignment_epoch",
                                  "The assignment epoch of the last accepted heartbeat", r);
  f.fenced = Registered(BuildCounter(), "streamcar_coord_fenced_total",
                        "Times this member lost its shards, by reason", r);
  f.shards_owned =
      Registered(BuildGauge(), "streamcar_shards_owned", "Shards this member holds", r);
  f.shards_pending =
      Registered(BuildGauge(), "streamcar_shards_pending",
                 "Shards assigned to this member still held by their previous owner", r);
  f.shards_revoking = Registered(BuildGauge(), "streamcar_shards_revoking",
                                 "Shards this member is draining for another", r);
  f.shard_owned =
      Registered(BuildGauge(), "streamcar_shard_owned", "1 while this member holds the shard", r);
  f.shard_fence_token = Registered(BuildGauge(), "streamcar_shard_fence_token",
                                   "The fence token this member holds on the shard (0: none)", r);
  f.fenced_ops = Registered(BuildCounter(), "streamcar_fenced_ops_total",
                            "Steps a shard's fence refused: a stale owner tried to act", r);
  f.rebalances = Registered(BuildCounter(), "streamcar_rebalances_total",
                            "Shards granted to or revoked from this member", r);
  f.revoke_duration = Registered(BuildHistogram(), "streamcar_revoke_duration_seconds",
                                 "From a revoke notice to the shard drained", r);
  f.takeover_duration = Registered(BuildHistogram(), "streamcar_takeover_duration_seconds",
                                   "From a grant to the shard's loop running on its fence", r);
  f.takeover_claimed = Registered(BuildCounter(), "streamcar_takeover_claimed_entries_total",
                                  "Pending entries inherited from previous owners at takeovers", r);
  f.shard_lag =
      Registered(BuildGauge(), "streamcar_shard_lag",
                 "Entries of the shard not yet read by the group (its owner exports it)", r);
  f.shard_stalled = Registered(
      BuildGauge(), "streamcar_shard_stalled",
      "1 while the coordinator judges the shard stalled: entries wait and none was acknowledged "
      "for sharding.stall_timeout (its owner exports it)",
      r);
  f.shard_pending =
      Registered(BuildGauge(), "streamcar_shard_pending",
                 "Entries of the shard read and not acknowledged (its owner exports it)", r);
  f.group_members = Registered(BuildGauge(), "streamcar_group_members",
                               "Members of the group (from the last heartbeat reply)", r);
  f.group_unowned_shards = Registered(BuildGauge(), "streamcar_group_unowned_shards",
                                      "Shards no member holds (from the last heartbeat reply)", r);
  f.group_unowned_seconds_max = Registered(
      BuildGauge(), "streamcar_group_unowned_seconds_max",
      "How long the longest-unowned shard has had no owner (from the last heartbeat reply)", r);
  return f;
}

struct MemberMetrics::ShardSeries {
  prometheus::Gauge circuit_state;   // its breaker's; the member publishes the worst
  SubscriptionMetrics loop;          // what the shard's loop reports into
  prometheus::Gauge inflight;        // its own count; the member publishes the sum (PublishTotals)
  prometheus::Gauge oldest_pending;  // its own age; the member publishes the oldest
  prometheus::Gauge* stalled = nullptr;  // streamcar_shard_stalled{shard}
};

MemberMetrics::MemberMetrics(const MemberFamilies& families, SubscriptionMetrics& subscription,
                             std::string name)
    : families_(families), subscription_(subscription), name_(std::move(name)) {
  const prometheus::Labels base = {{"subscription", name_}};
  heartbeat_duration_ = &families_.heartbeat_duration->Add(base, kHeartbeatBuckets);
  lease_remaining_ = &families_.lease_remaining->Add(base);
  member_epoch_ = &families_.member_epoch->Add(base);
  group_epoch_ = &families_.group_epoch->Add(base);
  assignment_epoch_ = &families_.assignment_epoch->Add(base);
  shards_owned_ = &families_.shards_owned->Add(base);
  shards_pending_ = &families_.shards_pending->Add(base);
  shards_revoking_ = &families_.shards_revoking->Add(base);
  revoke_duration_ = &families_.revoke_duration->Add(base, kRebalanceBuckets);
  takeover_duration_ = &families_.takeover_duration->Add(base, kRebalanceBuckets);
  takeover_claimed_ = &families_.takeover_claimed->Add(base);
  group_members_ = &families_.group_members->Add(base);
  group_unowned_ = &families_.group_unowned_shards->Add(base);
  group_unowned_seconds_ = &families_.group_unowned_seconds_max->Add(base);
  for (std::string_view state : kMemberStates) {
    states_[std::string(state)] =
        &families_.member_state->Add({{"subscription", name_}, {"state", std::string(state)}});
  }
  SetMemberState("joining");
  // The safety net's counters exist from the start: an alert on increase() needs a zero first.
  for (std::string_view op : {"read", "ack", "claim", "retry", "dead_letter", "install"}) {
    families_.fenced_ops->Add({{"subscription", name_}, {"op", std::string(op)}});
  }
  for (std::string_view reason : {"session_expired", "rebalance_timeout", "stale_epoch",
                                  "unknown_member", "stale_ownership", "local_lease"}) {
    families_.fenced->Add({{"subscription", name_}, {"reason", std::string(reason)}});
  }
  for (std::string_view kind : {"grant", "revoke"}) {
    families_.rebalances->Add({{"subscription", name_}, {"kind", std::string(kind)}});
  }
}

MemberMetrics::~MemberMetrics() = default;

void MemberMetrics::DeclareHeartbeatStatuses(std::span<const std::string_view> statuses) {
  for (std::string_view status : statuses) {
    families_.heartbeats->Add({{"subscription", name_}, {"status", std::string(status)}});
  }
  families_.heartbeats->Add({{"subscription", name_}, {"status", "error"}});
}

void MemberMetrics::Heartbeat(std::string_view status, double seconds) {
  families_.heartbeats->Add({{"subscription", name_}, {"status", std::string(status)}}).Increment();
  heartbeat_duration_->Observe(seconds);
}

void MemberMetrics::SetLeaseRemaining(double seconds) { lease_remaining_->Set(seconds); }

void MemberMetrics::SetMemberState(std::string_view state) {
  for (auto& [name, gauge] : states_) gauge->Set(name == state ? 1 : 0);
}

void MemberMetrics::SetEpochs(int64_t member, int64_t group, int64_t assignment) {
  member_epoch_->Set(static_cast<double>(member));
  group_epoch_->Set(static_cast<double>(group));
  assignment_epoch_->Set(static_cast<double>(assignment));
}

void MemberMetrics::Fenced(std::string_view reason) {
  families_.fenced->Add({{"subscription", name_}, {"reason", std::string(reason)}}).Increment();
}

void MemberMetrics::SetShardCounts(size_t owned, size_t pending, size_t revoking) {
  shards_owned_->Set(static_cast<double>(owned));
  shards_pending_->Set(static_cast<double>(pending));
  shards_revoking_->Set(static_cast<double>(revoking));
}

void MemberMetrics::SetShardOwned(int shard, bool owned, int64_t token) {
  const prometheus::Labels labels = {{"subscription", name_}, {"shard", std::to_string(shard)}};
  families_.shard_owned->Add(labels).Set(owned ? 1 : 0);
  families_.shard_fence_token->Add(labels).Set(static_cast<double>(owned ? token : 0));
}

void MemberMetrics::FencedOp(std::string_view op) {
  families_.fenced_ops->Add({{"subscription", name_}, {"op", std::string(op)}}).Increment();
}

void MemberMetrics::Rebalance(std::string_view kind) {
  families_.rebalances->Add({{"subscription", name_}, {"kind", std::string(kind)}}).Increment();
}

void MemberMetrics::RevokeTook(double seconds) { revoke_duration_->Observe(seconds); }

void MemberMetrics::TakeoverTook(double seconds) { takeover_duration_->Observe(seconds); }

void MemberMetrics::SetGroup(int64_t members, int64_t unowned_shards, double unowned_seconds_max) {
  group_members_->Set(static_cast<double>(members));
  group_unowned_->Set(static_cast<double>(unowned_shards));
  group_unowned_seconds_->Set(unowned_seconds_max);
}

void MemberMetrics::PublishTotals(size_t held) {
  subscription_.inflight->Set(static_cast<double>(held));
  double pending = 0;
  double lag = 0;
  double oldest = 0;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [shard, series] : shards_) {
      pending += series->loop.pending->Value();
      lag += series->loop.lag->Value();
      oldest = std::max(oldest, series->oldest_pending.Value());
    }
  }
  subscription_.pending->Set(pending);
  subscription_.lag->Set(lag);
  subscription_.oldest_pending->Set(oldest);
}

SubscriptionMetrics& MemberMetrics::ForShard(int shard) {
  std::lock_guard lock(mutex_);
  auto& slot = shards_[shard];
  if (!slot) {
    slot = std::make_unique<ShardSeries>();
    const prometheus::Labels labels = {{"subscription", name_}, {"shard", std::to_string(shard)}};
    slot->loop = subscription_;
    slot->loop.inflight = &slot->inflight;
    slot->loop.oldest_pending = &slot->oldest_pending;
    slot->loop.circuit_state = &slot->circuit_state;
    slot->loop.circuit_changed = [this] {
      std::lock_guard lock(mutex_);
      PublishCircuitStateLocked();
    };
    slot->loop.pending = &families_.shard_pending->Add(labels);
    slot->loop.lag = &families_.shard_lag->Add(labels);
    slot->stalled = &families_.shard_stalled->Add(labels);
    slot->stalled->Set(0);
    // A shard's start-up drain is its takeover: what it claims was the previous owners'.
    slot->loop.claimed_drain = takeover_claimed_;
  }
  return slot->loop;
}

void MemberMetrics::ForgetShard(int shard) {
  std::lock_guard lock(mutex_);
  auto it = shards_.find(shard);
  if (it == shards_.end()) return;
  families_.shard_pending->Remove(it->second->loop.pending);
  families_.shard_lag->Remove(it->second->loop.lag);
  families_.shard_stalled->Remove(it->second->stalled);
  shards_.erase(it);
  PublishCircuitStateLocked();  // a shard gone takes its breaker with it
}

void MemberMetrics::PublishCircuitStateLocked() {
  // The gauge's values (0 closed, 1 open, 2 half-open) from the least bad to the worst.
  constexpr std::array<int, 3> kByRank = {0, 2, 1};
  size_t worst = 0;
  for (const auto& [shard, series] : shards_) {
    const int state = static_cast<int>(series->circuit_state.Value());
    const auto rank = static_cast<size_t>(std::ranges::find(kByRank, state) - kByRank.begin());
    if (rank < kByRank.size()) worst = std::max(worst, rank);
  }
  subscription_.circuit_state->Set(kByRank[worst]);
}

void MemberMetrics::SetShardStalled(int shard, bool stalled) {
  std::lock_guard lock(mutex_);
  if (auto it = shards_.find(shard); it != shards_.end()) it->second->stalled->Set(stalled ? 1 : 0);
}

}  // namespace streamcar::admin
