#pragma once
// The metrics of SPEC section 5 in a prometheus-cpp registry. Label lookups happen once per
// subscription at start; the hot path only touches resolved counters (atomic adds).

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/delivery/outcome.h"
#include "sidecar/redis/topology/topology.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace streamcar::admin {

struct SubscriptionMetrics {
  // Indexed by delivery::DeliveryOutcome (kNone has no series) and delivery::DeadLetterReason.
  std::array<prometheus::Counter*, delivery::kDeliveryOutcomes.size()> delivered{};
  prometheus::Counter* acked = nullptr;
  std::array<prometheus::Counter*, delivery::kDeadLetterReasons.size()> dead_lettered{};
  prometheus::Counter* claimed_drain = nullptr;
  prometheus::Counter* claimed_autoclaim = nullptr;
  prometheus::Counter* deleted_entries = nullptr;
  prometheus::Counter* batch_unknown_ids = nullptr;
  prometheus::Counter* settle_lost_lease = nullptr;
  prometheus::Counter* settle_definite = nullptr;
  prometheus::Counter* settle_ambiguous = nullptr;
  prometheus::Counter* consumers_reaped = nullptr;  // SPEC 4.6
  prometheus::Histogram* delivery_duration = nullptr;
  prometheus::Histogram* end_to_end = nullptr;
  prometheus::Gauge* inflight = nullptr;
  prometheus::Gauge* pending = nullptr;
  prometheus::Gauge* lag = nullptr;
  prometheus::Gauge* oldest_pending = nullptr;
  prometheus::Gauge* handler_up = nullptr;
  prometheus::Gauge* circuit_state = nullptr;  // SPEC 11: 0 closed, 1 open, 2 half-open
  // A shard's loop (MemberMetrics::ForShard): circuit_state is its own breaker's, kept apart, and
  // this sets the subscription's streamcar_circuit_state to the worst over the member's shards
  // after each change. Empty for a plain subscription, whose gauge is the series. Any thread.
  std::function<void()> circuit_changed;
  prometheus::Counter* rate_limited_seconds = nullptr;  // SPEC 11
  // SPEC 11 routes: streamcar_filtered_total (every subscription), and streamcar_routed_total by
  // route, [0] "default" and [i + 1] routes[i] (nullptr for a drop route); empty without routes
  // (Metrics::DeclareRoutes).
  prometheus::Counter* filtered = nullptr;
  std::vector<prometheus::Counter*> routed;

  // The series of streamcar_deliveries_total{outcome}; nullptr for kNone (not a delivery).
  prometheus::Counter* Delivered(delivery::DeliveryOutcome outcome) const;
  // The series of streamcar_dead_lettered_total{reason}.
  prometheus::Counter* DeadLettered(delivery::DeadLetterReason reason) const;
  // By the class label of streamcar_settle_failures_total (SPEC 4.3).
  prometheus::Counter* SettleFailed(std::string_view failure_class) const;
};

// The families of SHARDING.md C1, registered once; MemberMetrics adds each member's series.
struct MemberFamilies {
  prometheus::Family<prometheus::Counter>* heartbeats;
  prometheus::Family<prometheus::Histogram>* heartbeat_duration;
  prometheus::Family<prometheus::Gauge>* lease_remaining;
  prometheus::Family<prometheus::Gauge>* member_state;
  prometheus::Family<prometheus::Gauge>* member_epoch;
  prometheus::Family<prometheus::Gauge>* group_epoch;
  prometheus::Family<prometheus::Gauge>* assignment_epoch;
  prometheus::Family<prometheus::Counter>* fenced;
  prometheus::Family<prometheus::Gauge>* shards_owned;
  prometheus::Family<prometheus::Gauge>* shards_pending;
  prometheus::Family<prometheus::Gauge>* shards_revoking;
  prometheus::Family<prometheus::Gauge>* shard_owned;
  prometheus::Family<prometheus::Gauge>* shard_fence_token;
  prometheus::Family<prometheus::Counter>* fenced_ops;
  prometheus::Family<prometheus::Counter>* rebalances;
  prometheus::Family<prometheus::Histogram>* revoke_duration;
  prometheus::Family<prometheus::Histogram>* takeover_duration;
  prometheus::Family<prometheus::Counter>* takeover_claimed;
  prometheus::Family<prometheus::Gauge>* shard_lag;
  prometheus::Family<prometheus::Gauge>* shard_stalled;
  prometheus::Family<prometheus::Gauge>* shard_pending;
  prometheus::Family<prometheus::Gauge>* group_members;
  prometheus::Family<prometheus::Gauge>* group_unowned_shards;
  prometheus::Family<prometheus::Gauge>* group_unowned_seconds_max;
};
class MemberMetrics;
class ProcessCollector;

// Also the topology's observer (SPEC 8: redirects, failovers, masters known).
class Metrics : public redis::TopologyObserver {
 public:
  Metrics();
  ~Metrics() override;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Thread-safe; the result lives as long as this object.
  SubscriptionMetrics& ForSubscription(const std::string& subscription);
  // The streamcar_routed_total series of a subscription's routes (SPEC 11), from the start:
  // `delivers[i]` says whether routes[i] delivers (a drop route has none). Call once, before its
  // loops start (they copy the series). Thread-safe.
  void DeclareRoutes(const std::string& subscription, const std::vector<bool>& delivers);
  // A sharded subscription's member (SHARDING.md C1). Thread-safe; lives as long as this object.
  MemberMetrics& ForMember(const std::string& subscription);
  prometheus::Counter& Trimmed(const std::string& stream);
  // The archive folder's (SPEC 10): entries newly written to the archive, and the time of W.
  prometheus::Counter& ArchiveFolded(const std::string& stream);
  prometheus::Gauge& ArchiveWatermark(const std::string& stream);
  prometheus::Gauge& redis_up() { return *redis_up_; }
  // Spans that never reached the OTLP collector (SPEC 11, telemetry/span_exporter.h): the
  // export queue was full, or their export failed. Thread-safe.
  prometheus::Counter& spans_dropped() { return *spans_dropped_; }
  // streamcar_config_reloads_total (SPEC 2): `result` is one of kReloadResults. Thread-safe.
  static constexpr std::array<std::string_view, 3> kReloadResults = {"applied", "refused",
                                                                     "invalid"};
  prometheus::Counter& ConfigReloads(std::string_view result);
  // The log API (SPEC 10): answers by route (produce|read|follow|other) and status code, entries
  // appended through the API, and the SSE followers of each stream. Thread-safe.
  prometheus::Counter& ApiRequests(const std::string& route, int code);
  prometheus::Counter& Produced(const std::string& stream);
  prometheus::Gauge& Followers(const std::string& stream);

  void OnRedirect(redis::ReplyKind kind) override;
  void OnFailover() override;
  void OnMastersKnown(int masters) override;

  // The Prometheus text exposition format: the registry's families, then the process series
  // (admin/process_metrics.h), read at each call.
  std::string Serialize() const;

 private:
  // The constructor's registrations, by topic.
  void RegisterDeliveryFamilies(prometheus::Registry& r);
  void RegisterLogFamilies(prometheus::Registry& r);
  void RegisterProgressFamilies(prometheus::Registry& r);
  void RegisterArchiveFamilies(prometheus::Registry& r);
  void RegisterHealthFamilies(prometheus::Registry& r);
  void RegisterTracingFamilies(prometheus::Registry& r);
  void RegisterReloadFamily(prometheus::Registry& r);
  void RegisterRouteFamilies(prometheus::Registry& r);

  std::shared_ptr<prometheus::Registry> registry_;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<SubscriptionMetrics>> subscriptions_;
  MemberFamilies member_families_{};
  std::map<std::string, std::unique_ptr<MemberMetrics>> members_;
  prometheus::Family<prometheus::Counter>* deliveries_;
  prometheus::Family<prometheus::Counter>* acked_;
  prometheus::Family<prometheus::Counter>* dead_lettered_;
  prometheus::Family<prometheus::Counter>* claimed_;
  prometheus::Family<prometheus::Counter>* deleted_;
  prometheus::Family<prometheus::Counter>* unknown_ids_;
  prometheus::Family<prometheus::Counter>* settle_failures_;
  prometheus::Family<prometheus::Counter>* consumers_reaped_;
  prometheus::Family<prometheus::Counter>* trimmed_;
  prometheus::Family<prometheus::Counter>* api_requests_;
  prometheus::Family<prometheus::Counter>* produced_;
  prometheus::Family<prometheus::Gauge>* followers_;
  prometheus::Family<prometheus::Counter>* archive_folded_;
  prometheus::Family<prometheus::Gauge>* archive_watermark_;
  prometheus::Family<prometheus::Histogram>* duration_;
  prometheus::Family<prometheus::Histogram>* end_to_end_;
  prometheus::Family<prometheus::Gauge>* inflight_;
  prometheus::Family<prometheus::Gauge>* pending_;
  prometheus::Family<prometheus::Gauge>* lag_;
  prometheus::Family<prometheus::Gauge>* oldest_pending_;
  prometheus::Family<prometheus::Gauge>* handler_up_;
  prometheus::Family<prometheus::Gauge>* circuit_state_;
  prometheus::Family<prometheus::Counter>* rate_limited_seconds_;
  prometheus::Family<prometheus::Counter>* routed_;    // SPEC 11
  prometheus::Family<prometheus::Counter>* filtered_;  // SPEC 11
  prometheus::Gauge* redis_up_;
  prometheus::Counter* spans_dropped_;
  std::array<prometheus::Counter*, kReloadResults.size()> config_reloads_{};
  prometheus::Counter* redirects_moved_;
  prometheus::Counter* redirects_ask_;
  prometheus::Counter* failovers_;
  prometheus::Gauge* redis_nodes_;
  std::unique_ptr<ProcessCollector> process_;
};

}  // namespace streamcar::admin
