#pragma once
// The subscription's Prometheus series (SPEC 5) as an attempt observer: every count and latency
// the pump, the settlement, intake and the health check report (attempt_observer.h) lands in
// admin::SubscriptionMetrics here, and only here. The gauges read from Redis are
// runtime/gauges.h's.
//
// Loop thread only.

#include "sidecar/admin/metrics.h"
#include "sidecar/runtime/attempt_observer.h"

namespace streamcar::runtime {

class MetricsObserver final : public AttemptObserver {
 public:
  // `metrics` outlives the observer.
  explicit MetricsObserver(admin::SubscriptionMetrics* metrics) : metrics_(metrics) {}

  // streamcar_delivery_duration_seconds of whatever reached the handler, and
  // streamcar_handler_up: 0 on a refused connection, 1 on any answer.
  void OnEnded(std::span<const EntryRef> refs, const delivery::HandlerResponse& response,
               SteadyTime started, SteadyTime now) override;
  // streamcar_deliveries_total{outcome}.
  void OnDecided(const EntryRef& ref, const delivery::Decision& decision) override;
  void OnUnknownIds(size_t count) override;
  // streamcar_acked_total, and streamcar_end_to_end_seconds from the entry id's time.
  void OnAcked(std::string_view id, int64_t now_ms) override;
  void OnAckedGone(std::string_view id) override;
  // streamcar_dead_lettered_total{reason}, and its acknowledgement.
  void OnDeadLettered(std::string_view id, const redis::DeadLetterMeta& meta) override;
  void OnSettleFailed(SettleClass failure, size_t count) override;
  void OnFoundDeleted(size_t count) override;
  // streamcar_deleted_entries_total, streamcar_claimed_total{source}.
  void OnRouted(IntakeSource source, size_t admitted, size_t deleted) override;
  // streamcar_routed_total{route}, streamcar_filtered_total (SPEC 11).
  void OnRouteTaken(const EntryRef& ref, int route) override;
  void OnFiltered(const EntryRef& ref) override;
  // streamcar_handler_up.
  void OnHealthVerdict(bool healthy) override;
  // streamcar_circuit_state, streamcar_rate_limited_seconds_total (SPEC 11).
  void OnCircuitState(CircuitState state) override;
  void OnRateLimited(double seconds) override;

 private:
  admin::SubscriptionMetrics* metrics_;
};

}  // namespace streamcar::runtime
