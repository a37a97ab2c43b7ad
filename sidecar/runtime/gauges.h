#pragma once
// The subscription's gauges that Redis knows and this process does not: streamcar_pending (the
// group's PEL size, all consumers), streamcar_lag (entries of the stream not yet read by the
// group) and streamcar_oldest_pending_seconds (the age of the group's oldest pending entry, all
// consumers), refreshed every kInterval; and streamcar_inflight, which the loop sets from its
// ledger.
//
// Pure: no I/O, and wall time from the injected clock (the oldest entry's age is the clock's
// now minus the millisecond time of XPENDING's smallest id: 0 when nothing is pending, never
// negative when the writer's clock was ahead). The loop drives it as a build/apply pair on its
// command connection:
//
//   on each beat (a timer armed at NextDue()):
//     commands = gauges.Commands(now)            // empty: nothing due, or a batch is still out
//     if (!commands.empty()) send them as one batch; when it ends: gauges.Apply(replies, now)
//
// Commands() hands out one batch at a time, and the loop calls Apply() exactly once for each
// batch it got, with the replies that arrived (none or a prefix when the connection failed:
// the gauges keep their values and the next beat tries again).
//
// Why two steps: the lag is XINFO GROUPS's own "lag" when Redis has one (exact). When it says nil
// (entries deleted in the unread range, or a server older than 7.0), the lag is counted after the
// group's last-delivered-id, which only the XINFO reply gives. So the beat is XINFO GROUPS and the
// XPENDING summary (count, smallest id, largest id, consumers) in one batch; when the XINFO
// reply needs a count, Apply() makes a second batch due at once (NextDue() <= now): the
// count (XRANGE after that id, at most redis::kGaugeLagCountCap entries, redis/group_info.h). The
// count transfers the entries it counts, so it runs at most once per kLagCountInterval; between
// counts the lag gauge keeps the last counted value.
//
// Loop thread only.

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "sidecar/admin/metrics.h"
#include "sidecar/common/clock.h"
#include "sidecar/redis/group_info.h"
#include "sidecar/redis/reply.h"
#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/cadences.h"
#include "sidecar/runtime/progress_report.h"

namespace streamcar::runtime {

class Gauges {
 public:
  static constexpr Millis kInterval = cadence::kGaugeRefresh;
  static constexpr Millis kLagCountInterval = cadence::kLagCount;

  // `ops`, `metrics` and `clock` (its WallMillis) outlive this object. The first beat is due at
  // once.
  Gauges(const redis::SubscriptionOps& ops, admin::SubscriptionMetrics* metrics,
         const Clock& clock);

  // What to send now: XINFO GROUPS and XPENDING when a beat is due, the lag count when the last
  // XINFO reply asked for one; empty when nothing is due or a batch is still out.
  std::vector<redis::Command> Commands(SteadyTime now);
  // The replies of the last batch Commands() returned, in order; fewer (or none) when the
  // connection failed before they arrived.
  void Apply(std::span<const redis::Reply> replies, SteadyTime now);
  // When Commands() has something to send next (<= now: at once, e.g. the lag count).
  SteadyTime NextDue() const;

  // streamcar_inflight: the entries the subscription holds now (its ledger's held()).
  void SetInflight(size_t held);
  // Each pending count read is reported to `report` too (outlives this).
  void ReportProgressTo(ProgressReport* report) { progress_ = report; }

 private:
  enum class Step { kNone, kInfo, kLagCount };

  void ApplyInfo(std::span<const redis::Reply> replies, SteadyTime now);
  void ApplyLagCount(std::span<const redis::Reply> replies);
  void ApplyOldest(const redis::Reply& reply);

  const redis::SubscriptionOps& ops_;
  admin::SubscriptionMetrics* metrics_;
  const Clock& clock_;
  ProgressReport* progress_ = nullptr;
  Step out_ = Step::kNone;                     // the batch the loop is sending
  SteadyTime next_info_{};                     // the next beat
  SteadyTime sent_at_{};                       // when the beat out now was sent
  SteadyTime next_lag_count_{};                // the earliest next count
  std::optional<redis::GroupInfo> count_for_;  // a lag count is due for this group state
  redis::GroupInfo counting_;                  // the group state the count out now is for
};

}  // namespace streamcar::runtime
