#pragma once
// The metrics of a sharded subscription's member (SHARDING.md C1). Member-scoped series describe
// this process; group-scoped ones (members, unowned shards) come from its last heartbeat reply,
// so every member exports them (aggregate with max by subscription). Shard labels are bounded by
// the shard count.
//
// Threads: the member thread sets everything except the shard loops' SubscriptionMetrics
// (ForShard), which each shard loop uses on its own thread, as a plain subscription does.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "sidecar/admin/metrics.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace streamcar::admin {

// Registers the families of SHARDING.md C1 (once per registry: Metrics does).
MemberFamilies RegisterMemberFamilies(prometheus::Registry& registry);

class MemberMetrics {
 public:
  MemberMetrics(const MemberFamilies& families, SubscriptionMetrics& subscription,
                std::string name);
  ~MemberMetrics();
  MemberMetrics(const MemberMetrics&) = delete;
  MemberMetrics& operator=(const MemberMetrics&) = delete;

  // The heartbeat statuses' series, at 0 (so that rate() and increase() see the first one);
  // "error" (no answer) is added here.
  void DeclareHeartbeatStatuses(std::span<const std::string_view> statuses);
  // One heartbeat's answer: its status name (or "error" when no reply came) and its round trip.
  void Heartbeat(std::string_view status, double seconds);
  void SetLeaseRemaining(double seconds);
  // `state` is 1, every other member state 0.
  void SetMemberState(std::string_view state);
  void SetEpochs(int64_t member, int64_t group, int64_t assignment);
  // Why this member lost its shards: session_expired | rebalance_timeout | stale_epoch |
  // unknown_member | stale_ownership | local_lease.
  void Fenced(std::string_view reason);
  void SetShardCounts(size_t owned, size_t pending, size_t revoking);
  // The shard is this member's (with its token) or not (token 0).
  void SetShardOwned(int shard, bool owned, int64_t token);
  // A fenced step refused: read | ack | claim | retry | dead_letter | install.
  void FencedOp(std::string_view op);
  void Rebalance(std::string_view kind);  // grant | revoke
  void RevokeTook(double seconds);        // revoke notice -> drained
  void TakeoverTook(double seconds);      // grant -> the shard's loop is running
  void SetGroup(int64_t members, int64_t unowned_shards, double unowned_seconds_max);
  // The subscription's streamcar_inflight (the sum of the shard loops' held entries), and its
  // streamcar_pending and streamcar_lag: the sums over the shards this member owns (each shard
  // has one owner, so a sum across members counts each once); its
  // streamcar_oldest_pending_seconds: the oldest over those shards (max across members).
  void PublishTotals(size_t held);

  // What a shard loop reports into: the subscription's counters and histograms, with its pending
  // and lag gauges as streamcar_shard_pending / streamcar_shard_lag{shard}, its start-up claims
  // as streamcar_takeover_claimed_entries_total, and its in-flight count kept apart (PublishTotals
  // publishes the sum). Lives as long as this object.
  SubscriptionMetrics& ForShard(int shard);
  // The shard's lag and pending series are exported by its owner only: dropped when it goes.
  void ForgetShard(int shard);
  // streamcar_shard_stalled (SHARDING.md B6.1), as the last heartbeat reply judged it; only for a
  // shard whose series ForShard made (its owner's), like the lag.
  void SetShardStalled(int shard, bool stalled);

 private:
  struct ShardSeries;

  // streamcar_circuit_state{subscription}: the worst of the shards' breakers (open, then
  // half-open, then closed), so that it never reads closed while one of them is open. Any
  // thread; mutex_ held.
  void PublishCircuitStateLocked();

  const MemberFamilies& families_;
  SubscriptionMetrics& subscription_;
  const std::string name_;
  prometheus::Histogram* heartbeat_duration_;
  prometheus::Gauge* lease_remaining_;
  prometheus::Gauge* member_epoch_;
  prometheus::Gauge* group_epoch_;
  prometheus::Gauge* assignment_epoch_;
  prometheus::Gauge* shards_owned_;
  prometheus::Gauge* shards_pending_;
  prometheus::Gauge* shards_revoking_;
  prometheus::Histogram* revoke_duration_;
  prometheus::Histogram* takeover_duration_;
  prometheus::Counter* takeover_claimed_;
  prometheus::Gauge* group_members_;
  prometheus::Gauge* group_unowned_;
  prometheus::Gauge* group_unowned_seconds_;
  std::map<std::string, prometheus::Gauge*, std::less<>> states_;
  mutable std::mutex mutex_;  // shards_: ForShard runs on the member thread, read by none else
  std::map<int, std::unique_ptr<ShardSeries>> shards_;
};

}  // namespace streamcar::admin
