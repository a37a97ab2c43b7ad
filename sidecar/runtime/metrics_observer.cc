#include "sidecar/runtime/metrics_observer.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <chrono>

#include "sidecar/common/text.h"
#include "sidecar/runtime/intake.h"

namespace streamcar::runtime {

void MetricsObserver::OnEnded(std::span<const EntryRef> /*refs*/,
                              const delivery::HandlerResponse& response, SteadyTime started,
                              SteadyTime now) {
  if (response.kind == delivery::HandlerResponse::Kind::kRefused) {
    metrics_->handler_up->Set(0);  // not a delivery: no duration
    return;
  }
  metrics_->delivery_duration->Observe(std::chrono::duration<double>(now - started).count());
  metrics_->handler_up->Set(1);
}

void MetricsObserver::OnDecided(const EntryRef& /*ref*/, const delivery::Decision& decision) {
  if (auto* counter = metrics_->Delivered(decision.outcome)) counter->Increment();
}

void MetricsObserver::OnUnknownIds(size_t count) {
  metrics_->batch_unknown_ids->Increment(static_cast<double>(count));
}

void MetricsObserver::OnAcked(std::string_view id, int64_t now_ms) {
  metrics_->acked->Increment();
  if (auto parsed = ParseEntryId(id)) {
    metrics_->end_to_end->Observe(static_cast<double>(now_ms - static_cast<int64_t>(parsed->ms)) /
                                  1000.0);
  }
}

void MetricsObserver::OnAckedGone(std::string_view /*id*/) { metrics_->acked->Increment(); }

void MetricsObserver::OnDeadLettered(std::string_view /*id*/, const redis::DeadLetterMeta& meta) {
  if (auto reason = delivery::DeadLetterReasonNamed(meta.reason)) {
    metrics_->DeadLettered(*reason)->Increment();
  }
  metrics_->acked->Increment();
}

void MetricsObserver::OnSettleFailed(SettleClass failure, size_t count) {
  if (count == 0) return;
  metrics_->SettleFailed(Name(failure))->Increment(static_cast<double>(count));
}

void MetricsObserver::OnFoundDeleted(size_t count) {
  metrics_->deleted_entries->Increment(static_cast<double>(count));
}

void MetricsObserver::OnRouted(IntakeSource source, size_t admitted, size_t deleted) {
  if (deleted > 0) metrics_->deleted_entries->Increment(static_cast<double>(deleted));
  if (admitted > 0 && source != IntakeSource::kNew) {
    auto* claimed =
        source == IntakeSource::kReclaim ? metrics_->claimed_autoclaim : metrics_->claimed_drain;
    claimed->Increment(static_cast<double>(admitted));
  }
}

void MetricsObserver::OnRouteTaken(const EntryRef& /*ref*/, int route) {
  // Series exist for the declared routes only (Metrics::DeclareRoutes).
  const size_t at = static_cast<size_t>(route) + 1;  // route -1 (none matched) is 0
  if (at < metrics_->routed.size() && metrics_->routed[at] != nullptr) {
    metrics_->routed[at]->Increment();
  }
}

void MetricsObserver::OnFiltered(const EntryRef& /*ref*/) {
  if (metrics_->filtered != nullptr) metrics_->filtered->Increment();
}

void MetricsObserver::OnHealthVerdict(bool healthy) { metrics_->handler_up->Set(healthy ? 1 : 0); }

void MetricsObserver::OnCircuitState(CircuitState state) {
  metrics_->circuit_state->Set(static_cast<double>(state));
  // A shard's breaker: the subscription's gauge is the worst over the member's shards.
  if (metrics_->circuit_changed) metrics_->circuit_changed();
}

void MetricsObserver::OnRateLimited(double seconds) {
  metrics_->rate_limited_seconds->Increment(seconds);
}

}  // namespace streamcar::runtime
