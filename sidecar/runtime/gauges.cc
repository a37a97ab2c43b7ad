#include "sidecar/runtime/gauges.h"

#include <prometheus/gauge.h>

#include <utility>

#include "sidecar/redis/group_info.h"

namespace streamcar::runtime {

Gauges::Gauges(const redis::SubscriptionOps& ops, admin::SubscriptionMetrics* metrics,
               const Clock& clock)
    : ops_(ops), metrics_(metrics), clock_(clock) {}

std::vector<redis::Command> Gauges::Commands(SteadyTime now) {
  std::vector<redis::Command> commands;
  if (out_ != Step::kNone) return commands;
  if (count_for_) {
    commands.push_back(
        redis::LagCount(ops_.stream(), count_for_->last_delivered_id, redis::kGaugeLagCountCap));
    counting_ = std::move(*count_for_);
    count_for_.reset();
    out_ = Step::kLagCount;
    return commands;
  }
  if (now < next_info_) return commands;
  commands.push_back(redis::GroupsOf(ops_.stream()));
  commands.push_back(redis::PendingSummary(ops_.stream(), ops_.group()));
  next_info_ = now + kInterval;
  sent_at_ = now;
  out_ = Step::kInfo;
  return commands;
}

void Gauges::Apply(std::span<const redis::Reply> replies, SteadyTime now) {
  const Step step = std::exchange(out_, Step::kNone);
  // An outage, or NOGROUP before the group is created again: the gauges keep their values.
  if (replies.empty()) return;
  if (step == Step::kInfo) {
    ApplyInfo(replies, now);
    if (replies.size() > 1) ApplyOldest(replies[1]);
  }
  if (step == Step::kLagCount) ApplyLagCount(replies);
}

void Gauges::ApplyInfo(std::span<const redis::Reply> replies, SteadyTime now) {
  auto info = redis::ParseGroupInfo(replies.front().view(), ops_.group());
  if (!info.ok() || !info->found) return;
  metrics_->pending->Set(static_cast<double>(info->pending));
  if (redis::NeedsLagCount(*info)) {
    if (progress_ != nullptr) {
      progress_->SetRead(static_cast<int64_t>(info->pending), std::nullopt, sent_at_);
    }
    // Between two counts the lag gauge keeps the last counted value.
    if (now >= next_lag_count_) {
      next_lag_count_ = now + kLagCountInterval;
      count_for_ = std::move(*info);
    }
    return;
  }
  const redis::Lag lag = redis::LagOf(*info, std::nullopt);
  if (lag.value) metrics_->lag->Set(static_cast<double>(*lag.value));
  if (progress_ != nullptr) {
    progress_->SetRead(static_cast<int64_t>(info->pending), lag.value, sent_at_);
  }
}

void Gauges::ApplyLagCount(std::span<const redis::Reply> replies) {
  auto counted = redis::ParseLagCount(replies.front().view());
  if (!counted.ok()) return;
  if (const redis::Lag lag = redis::LagOf(counting_, *counted); lag.value)
    metrics_->lag->Set(static_cast<double>(*lag.value));
}

void Gauges::ApplyOldest(const redis::Reply& reply) {
  // NOGROUP (the group is being created again) or another error: the gauge keeps its value.
  auto pending = redis::ParsePendingOldest(reply.view());
  if (!pending.ok()) return;
  double age_seconds = 0;
  if (pending->oldest_ms) {
    const int64_t now_ms = clock_.WallMillis();
    const auto oldest_ms = static_cast<int64_t>(*pending->oldest_ms);
    if (now_ms > oldest_ms) age_seconds = static_cast<double>(now_ms - oldest_ms) / 1000.0;
  }
  metrics_->oldest_pending->Set(age_seconds);
}

SteadyTime Gauges::NextDue() const {
  if (count_for_) return SteadyTime::min();
  return next_info_;
}

void Gauges::SetInflight(size_t held) { metrics_->inflight->Set(static_cast<double>(held)); }

}  // namespace streamcar::runtime
