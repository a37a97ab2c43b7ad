#include "sidecar/admin/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "sidecar/admin/member_metrics.h"
#include "sidecar/admin/process_metrics.h"
#include "sidecar/common/version.h"
#include "sidecar/delivery/routes.h"

namespace streamcar::admin {
namespace {

const prometheus::Histogram::BucketBoundaries kDurationBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
const prometheus::Histogram::BucketBoundaries kEndToEndBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600};

}  // namespace

prometheus::Counter* SubscriptionMetrics::Delivered(delivery::DeliveryOutcome outcome) const {
  const auto index = static_cast<size_t>(outcome);
  return index < delivered.size() ? delivered[index] : nullptr;
}

prometheus::Counter* SubscriptionMetrics::DeadLettered(delivery::DeadLetterReason reason) const {
  return dead_lettered[static_cast<size_t>(reason)];
}

prometheus::Counter* SubscriptionMetrics::SettleFailed(std::string_view failure_class) const {
  if (failure_class == "lost_lease") return settle_lost_lease;
  if (failure_class == "ambiguous") return settle_ambiguous;
  return settle_definite;
}

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      process_(std::make_unique<ProcessCollector>()) {
  auto& r = *registry_;
  // What runs where: join it to any series with `* on(instance) group_left(version, revision)`.
  prometheus::BuildGauge()
      .Name("streamcar_build_info")
      .Help("1, labelled with the version and source revision of this binary")
      .Register(r)
      .Add({{"version", kVersion}, {"revision", kRevision}})
      .Set(1);
  // Registered in this order (the text exposition lists each kind of family in it).
  RegisterDeliveryFamilies(r);
  RegisterLogFamilies(r);
  RegisterProgressFamilies(r);
  RegisterArchiveFamilies(r);
  RegisterHealthFamilies(r);
  RegisterTracingFamilies(r);
  RegisterRouteFamilies(r);
  RegisterReloadFamily(r);
  member_families_ = RegisterMemberFamilies(r);
}

// What became of the entries: delivered, acknowledged, dead-lettered, claimed, settled.
void Metrics::RegisterDeliveryFamilies(prometheus::Registry& r) {
  deliveries_ = &prometheus::BuildCounter()
                     .Name("streamcar_deliveries_total")
                     .Help("Deliveries to the handler by outcome")
                     .Register(r);
  acked_ = &prometheus::BuildCounter()
                .Name("streamcar_acked_total")
                .Help("Entries acknowledged (XACK) after success or dead-lettering")
                .Register(r);
  dead_lettered_ = &prometheus::BuildCounter()
                        .Name("streamcar_dead_lettered_total")
                        .Help("Entries written to the dead-letter stream, by reason")
                        .Register(r);
  claimed_ =
      &prometheus::BuildCounter()
           .Name("streamcar_claimed_total")
           .Help("Pending entries taken over: own PEL drain at start, or XAUTOCLAIM of a peer's")
           .Register(r);
  deleted_ = &prometheus::BuildCounter()
                  .Name("streamcar_deleted_entries_total")
                  .Help("Pending entries whose payload was gone (trimmed or deleted), acknowledged")
                  .Register(r);
  consumers_reaped_ =
      &prometheus::BuildCounter()
           .Name("streamcar_consumers_reaped_total")
           .Help(
               "Other consumers removed from the group: idle above consumer.reap_idle, nothing "
               "pending (SPEC 4.6)")
           .Register(r);
  unknown_ids_ = &prometheus::BuildCounter()
                      .Name("streamcar_batch_unknown_ids_total")
                      .Help("Ids in a batch answer's failures that were not in the batch")
                      .Register(r);
  settle_failures_ =
      &prometheus::BuildCounter()
           .Name("streamcar_settle_failures_total")
           .Help("Settlements that failed after the handler's answer, by class (SPEC 4.3)")
           .Register(r);
}

// Tracing (SPEC 11): always present, 0 while tracing is off.
void Metrics::RegisterTracingFamilies(prometheus::Registry& r) {
  spans_dropped_ = &prometheus::BuildCounter()
                        .Name("streamcar_spans_dropped_total")
                        .Help(
                            "Spans dropped before reaching the OTLP collector: the export queue "
                            "was full, or their export failed")
                        .Register(r)
                        .Add({});
}

// SPEC 2's reload: every result present (at 0) from the start.
void Metrics::RegisterReloadFamily(prometheus::Registry& r) {
  auto& family = prometheus::BuildCounter()
                     .Name("streamcar_config_reloads_total")
                     .Help("Configuration reloads (SIGHUP, or the file changed) by result")
                     .Register(r);
  for (size_t i = 0; i < kReloadResults.size(); ++i) {
    config_reloads_[i] = &family.Add({{"result", std::string(kReloadResults[i])}});
  }
}

prometheus::Counter& Metrics::ConfigReloads(std::string_view result) {
  for (size_t i = 0; i < kReloadResults.size(); ++i) {
    if (kReloadResults[i] == result) return *config_reloads_[i];
  }
  return *config_reloads_.back();
}

// The log (SPEC 10): retention, the API and its followers.
void Metrics::RegisterLogFamilies(prometheus::Registry& r) {
  trimmed_ = &prometheus::BuildCounter()
                  .Name("streamcar_trimmed_total")
                  .Help("Entries removed by the retention beat")
                  .Register(r);
  api_requests_ = &prometheus::BuildCounter()
                       .Name("streamcar_api_requests_total")
                       .Help("Log API answers by route and HTTP status (SPEC 10)")
                       .Register(r);
  produced_ =
      &prometheus::BuildCounter()
           .Name("streamcar_produced_total")
           .Help("Entries appended through the log API (repeats of an idempotency key not counted)")
           .Register(r);
  followers_ = &prometheus::BuildGauge()
                    .Name("streamcar_followers")
                    .Help("Server-Sent Events followers of the stream now")
                    .Register(r);
}

// How long deliveries take, and how far behind each group is.
void Metrics::RegisterProgressFamilies(prometheus::Registry& r) {
  duration_ = &prometheus::BuildHistogram()
                   .Name("streamcar_delivery_duration_seconds")
                   .Help("Time of one POST to the handler")
                   .Register(r);
  end_to_end_ = &prometheus::BuildHistogram()
                     .Name("streamcar_end_to_end_seconds")
                     .Help("From the entry id's time to its acknowledgement")
                     .Register(r);
  inflight_ = &prometheus::BuildGauge()
                   .Name("streamcar_inflight")
                   .Help("Entries held by this sidecar: being delivered or waiting for a retry")
                   .Register(r);
  pending_ = &prometheus::BuildGauge()
                  .Name("streamcar_pending")
                  .Help("Pending entries of the group (XPENDING), all consumers")
                  .Register(r);
  lag_ = &prometheus::BuildGauge()
              .Name("streamcar_lag")
              .Help("Entries of the stream not yet read by the group")
              .Register(r);
  oldest_pending_ =
      &prometheus::BuildGauge()
           .Name("streamcar_oldest_pending_seconds")
           .Help("Age of the group's oldest pending entry, all consumers (0: none pending)")
           .Register(r);
}

// The archive folder (SPEC 10).
void Metrics::RegisterArchiveFamilies(prometheus::Registry& r) {
  archive_folded_ = &prometheus::BuildCounter()
                         .Name("streamcar_archive_folded_total")
                         .Help("Entries written to the archive by the folder (a refold counts 0)")
                         .Register(r);
  archive_watermark_ =
      &prometheus::BuildGauge()
           .Name("streamcar_archive_watermark_seconds")
           .Help("Time of the archive watermark W: the ms part of the highest folded id / 1000")
           .Register(r);
}

// The handler's and Redis's health, and the cluster's redirects and failovers (SPEC 8).
void Metrics::RegisterHealthFamilies(prometheus::Registry& r) {
  handler_up_ = &prometheus::BuildGauge()
                     .Name("streamcar_handler_up")
                     .Help("1 while the handler accepts connections (and health_url answers 2xx)")
                     .Register(r);
  // The delivery policies' gates (SPEC 11).
  circuit_state_ =
      &prometheus::BuildGauge()
           .Name("streamcar_circuit_state")
           .Help("The circuit breaker: 0 closed, 1 open, 2 half-open (the probe is out)")
           .Register(r);
  rate_limited_seconds_ = &prometheus::BuildCounter()
                               .Name("streamcar_rate_limited_seconds_total")
                               .Help("Time delivery waited on handler.max_rps")
                               .Register(r);
  redis_up_ = &prometheus::BuildGauge()
                   .Name("streamcar_redis_up")
                   .Help("1 while every Redis connection of the sidecar is up")
                   .Register(r)
                   .Add({});
  // SPEC 8: every series exists at 0 in every mode.
  auto& redirects = prometheus::BuildCounter()
                        .Name("streamcar_redis_redirects_total")
                        .Help("Cluster redirects followed, by kind (moved, ask)")
                        .Register(r);
  redirects_moved_ = &redirects.Add({{"kind", "moved"}});
  redirects_ask_ = &redirects.Add({{"kind", "ask"}});
  failovers_ = &prometheus::BuildCounter()
                    .Name("streamcar_redis_failovers_total")
                    .Help("Failovers seen: a used slot's master, or the Sentinel master, changed")
                    .Register(r)
                    .Add({});
  redis_nodes_ = &prometheus::BuildGauge()
                      .Name("streamcar_redis_nodes")
                      .Help("Redis masters known (cluster: in the slot map; else 1 once known)")
                      .Register(r)
                      .Add({});
}

// SPEC 11 routes and filters.
void Metrics::RegisterRouteFamilies(prometheus::Registry& r) {
  routed_ = &prometheus::BuildCounter()
                 .Name("streamcar_routed_total")
                 .Help("Deliveries by route: its index in routes, or default (handler.url)")
                 .Register(r);
  filtered_ = &prometheus::BuildCounter()
                   .Name("streamcar_filtered_total")
                   .Help("Entries a drop route acknowledged without delivering them")
                   .Register(r);
}

void Metrics::DeclareRoutes(const std::string& subscription, const std::vector<bool>& delivers) {
  SubscriptionMetrics& m = ForSubscription(subscription);
  std::lock_guard lock(mutex_);
  m.routed.assign(delivers.size() + 1, nullptr);
  for (size_t i = 0; i <= delivers.size(); ++i) {
    if (i > 0 && !delivers[i - 1]) continue;
    const int route = static_cast<int>(i) - 1;
    m.routed[i] =
        &routed_->Add({{"subscription", subscription}, {"route", delivery::RouteLabel(route)}});
  }
}

void Metrics::OnRedirect(redis::ReplyKind kind) {
  if (kind == redis::ReplyKind::kMoved) redirects_moved_->Increment();
  if (kind == redis::ReplyKind::kAsk) redirects_ask_->Increment();
}

void Metrics::OnFailover() { failovers_->Increment(); }

void Metrics::OnMastersKnown(int masters) { redis_nodes_->Set(masters); }

Metrics::~Metrics() = default;

SubscriptionMetrics& Metrics::ForSubscription(const std::string& subscription) {
  std::lock_guard lock(mutex_);
  auto& slot = subscriptions_[subscription];
  if (slot) return *slot;
  slot = std::make_unique<SubscriptionMetrics>();
  auto& m = *slot;
  const prometheus::Labels base = {{"subscription", subscription}};
  auto with = [&](const char* key, std::string_view value) {
    prometheus::Labels labels = base;
    labels[key] = std::string(value);
    return labels;
  };
  // Every series exists from the start (SPEC 5); the hot path indexes these arrays.
  for (const auto outcome : delivery::kDeliveryOutcomes) {
    m.delivered.at(static_cast<size_t>(outcome)) =
        &deliveries_->Add(with("outcome", delivery::Name(outcome)));
  }
  m.acked = &acked_->Add(base);
  for (const auto reason : delivery::kDeadLetterReasons) {
    m.dead_lettered.at(static_cast<size_t>(reason)) =
        &dead_lettered_->Add(with("reason", delivery::Name(reason)));
  }
  m.claimed_drain = &claimed_->Add(with("source", "drain"));
  m.claimed_autoclaim = &claimed_->Add(with("source", "autoclaim"));
  m.deleted_entries = &deleted_->Add(base);
  m.batch_unknown_ids = &unknown_ids_->Add(base);
  m.settle_lost_lease = &settle_failures_->Add(with("class", "lost_lease"));
  m.settle_definite = &settle_failures_->Add(with("class", "definite"));
  m.settle_ambiguous = &settle_failures_->Add(with("class", "ambiguous"));
  m.consumers_reaped = &consumers_reaped_->Add(base);
  m.delivery_duration = &duration_->Add(base, kDurationBuckets);
  m.end_to_end = &end_to_end_->Add(base, kEndToEndBuckets);
  m.inflight = &inflight_->Add(base);
  m.pending = &pending_->Add(base);
  m.lag = &lag_->Add(base);
  m.oldest_pending = &oldest_pending_->Add(base);
  m.handler_up = &handler_up_->Add(base);
  m.handler_up->Set(1);
  m.circuit_state = &circuit_state_->Add(base);
  m.rate_limited_seconds = &rate_limited_seconds_->Add(base);
  m.filtered = &filtered_->Add(base);
  return m;
}

MemberMetrics& Metrics::ForMember(const std::string& subscription) {
  SubscriptionMetrics& of_subscription = ForSubscription(subscription);
  std::lock_guard lock(mutex_);
  auto& slot = members_[subscription];
  if (!slot)
    slot = std::make_unique<MemberMetrics>(member_families_, of_subscription, subscription);
  return *slot;
}

prometheus::Counter& Metrics::Trimmed(const std::string& stream) {
  std::lock_guard lock(mutex_);
  return trimmed_->Add({{"stream", stream}});
}

prometheus::Counter& Metrics::ApiRequests(const std::string& route, int code) {
  std::lock_guard lock(mutex_);
  return api_requests_->Add({{"route", route}, {"code", std::to_string(code)}});
}

prometheus::Counter& Metrics::Produced(const std::string& stream) {
  std::lock_guard lock(mutex_);
  return produced_->Add({{"stream", stream}});
}

prometheus::Gauge& Metrics::Followers(const std::string& stream) {
  std::lock_guard lock(mutex_);
  return followers_->Add({{"stream", stream}});
}

prometheus::Counter& Metrics::ArchiveFolded(const std::string& stream) {
  std::lock_guard lock(mutex_);
  return archive_folded_->Add({{"stream", stream}});
}

prometheus::Gauge& Metrics::ArchiveWatermark(const std::string& stream) {
  std::lock_guard lock(mutex_);
  return archive_watermark_->Add({{"stream", stream}});
}

std::string Metrics::Serialize() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& family : process_->Collect()) families.push_back(std::move(family));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace streamcar::admin
