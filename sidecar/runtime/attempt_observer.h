#pragma once
// Who watches a delivery attempt and what became of its entries: a request left for the handler,
// it ended with an answer (or a refusal, a timeout, a broken exchange), each entry got a
// decision, and the settlement acknowledged, dead-lettered or failed to settle it, with a class.
// Also what intake routed and the health check's verdicts: everything the subscription's
// Prometheus series count (metrics_observer.h), and the span per attempt
// (telemetry/tracing_observer.h), which SubscriptionDeps::observers adds.
//
// Single-threaded: the subscription's loop thread makes every call, in the order the events
// happen. An observer must not call back into what reports to it. Every event has an empty
// default, so an observer overrides only the ones it needs, and a bare AttemptObserver watches
// nothing (a test's).

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/stream_entry.h"
#include "sidecar/delivery/encoder.h"
#include "sidecar/delivery/outcome.h"
#include "sidecar/redis/dead_letter_record.h"
#include "sidecar/runtime/entry_ledger.h"
#include "sidecar/runtime/settle_batch.h"

namespace streamcar::runtime {

enum class IntakeSource;  // intake.h

// The circuit breaker's state (circuit_breaker_gate.h), as streamcar_circuit_state shows it.
enum class CircuitState { kClosed = 0, kOpen = 1, kHalfOpen = 2 };

// One request to the handler as it leaves: its entries and the request itself.
struct OutgoingRequest {
  std::span<const EntryRef> refs;
  std::span<const StreamEntry* const> entries;  // the refs' entries, in their order
  // An observer may add or replace a header here (tracing: the span's own traceparent), and
  // nothing else: the encoder (delivery/encoder.h) made the rest.
  delivery::HttpRequest* request = nullptr;
};

class AttemptObserver {
 public:
  virtual ~AttemptObserver() = default;

  // --- One request to the handler: one entry, or a batch of them ---
  // It leaves now.
  virtual void OnStarted(const OutgoingRequest& /*outgoing*/, SteadyTime /*now*/) {}
  // It ended at `now` (it left at `started`): an answer, a timeout, a broken exchange, or a
  // refused connection (kRefused: no attempt was made, the entries go back to the queue).
  virtual void OnEnded(std::span<const EntryRef> /*refs*/,
                       const delivery::HandlerResponse& /*response*/, SteadyTime /*started*/,
                       SteadyTime /*now*/) {}
  // What the answer means for one entry of it (an entry let go meanwhile gets none).
  virtual void OnDecided(const EntryRef& /*ref*/, const delivery::Decision& /*decision*/) {}
  // A batch answer named `count` ids that were not in the batch (ignored).
  virtual void OnUnknownIds(size_t /*count*/) {}

  // --- The settlement, by entry id ---
  // Acknowledged after a delivery, confirmed at wall-clock `now_ms` (entry ids carry their
  // write time).
  virtual void OnAcked(std::string_view /*id*/, int64_t /*now_ms*/) {}
  // Acknowledged without a delivery: its payload was gone.
  virtual void OnAckedGone(std::string_view /*id*/) {}
  // Written to the dead-letter stream and acknowledged.
  virtual void OnDeadLettered(std::string_view /*id*/, const redis::DeadLetterMeta& /*meta*/) {}
  // A settlement step failed for `count` entries (SPEC 4.3's classes).
  virtual void OnSettleFailed(SettleClass /*failure*/, size_t /*count*/) {}
  // Found deleted or trimmed while it waited for its retry: it is acknowledged, never delivered.
  virtual void OnFoundDeleted(size_t /*count*/) {}

  // --- Intake ---
  // A read or claim from `source` brought `admitted` entries to deliver and `deleted` ids whose
  // payload is gone (acknowledged without a delivery).
  virtual void OnRouted(IntakeSource /*source*/, size_t /*admitted*/, size_t /*deleted*/) {}

  // --- Routes (SPEC 11, delivery/routes.h) ---
  // A delivery attempt of the entry went to route `route` (its index in `routes`; -1: no route
  // matched, so handler.url): told when its answer (a timeout, a connection error included)
  // comes, once per attempt; a refused connection is no attempt (SPEC 3.2) and is not told.
  virtual void OnRouteTaken(const EntryRef& /*ref*/, int /*route*/) {}
  // A `drop: true` route matched the entry: acknowledged without a delivery.
  virtual void OnFiltered(const EntryRef& /*ref*/) {}

  // --- The handler's health check (handler.health_url) ---
  // Its verdict changed, or was first given (false before the first check).
  virtual void OnHealthVerdict(bool /*healthy*/) {}

  // --- The delivery policies' gates (SPEC 11) ---
  // The circuit breaker changed state.
  virtual void OnCircuitState(CircuitState /*state*/) {}
  // Delivery waited this long on the rate limit (handler.max_rps).
  virtual void OnRateLimited(double /*seconds*/) {}
};

// Several observers as one: each event goes to each, in the order they were added.
class AttemptObservers final : public AttemptObserver {
 public:
  // Each observer outlives this.
  AttemptObservers() = default;
  AttemptObservers(std::initializer_list<AttemptObserver*> observers) : observers_(observers) {}
  void Add(AttemptObserver* observer) { observers_.push_back(observer); }

  void OnStarted(const OutgoingRequest& outgoing, SteadyTime now) override {
    for (auto* o : observers_) o->OnStarted(outgoing, now);
  }
  void OnEnded(std::span<const EntryRef> refs, const delivery::HandlerResponse& response,
               SteadyTime started, SteadyTime now) override {
    for (auto* o : observers_) o->OnEnded(refs, response, started, now);
  }
  void OnDecided(const EntryRef& ref, const delivery::Decision& decision) override {
    for (auto* o : observers_) o->OnDecided(ref, decision);
  }
  void OnUnknownIds(size_t count) override {
    for (auto* o : observers_) o->OnUnknownIds(count);
  }
  void OnAcked(std::string_view id, int64_t now_ms) override {
    for (auto* o : observers_) o->OnAcked(id, now_ms);
  }
  void OnAckedGone(std::string_view id) override {
    for (auto* o : observers_) o->OnAckedGone(id);
  }
  void OnDeadLettered(std::string_view id, const redis::DeadLetterMeta& meta) override {
    for (auto* o : observers_) o->OnDeadLettered(id, meta);
  }
  void OnSettleFailed(SettleClass failure, size_t count) override {
    for (auto* o : observers_) o->OnSettleFailed(failure, count);
  }
  void OnFoundDeleted(size_t count) override {
    for (auto* o : observers_) o->OnFoundDeleted(count);
  }
  void OnRouted(IntakeSource source, size_t admitted, size_t deleted) override {
    for (auto* o : observers_) o->OnRouted(source, admitted, deleted);
  }
  void OnRouteTaken(const EntryRef& ref, int route) override {
    for (auto* o : observers_) o->OnRouteTaken(ref, route);
  }
  void OnFiltered(const EntryRef& ref) override {
    for (auto* o : observers_) o->OnFiltered(ref);
  }
  void OnHealthVerdict(bool healthy) override {
    for (auto* o : observers_) o->OnHealthVerdict(healthy);
  }
  void OnCircuitState(CircuitState state) override {
    for (auto* o : observers_) o->OnCircuitState(state);
  }
  void OnRateLimited(double seconds) override {
    for (auto* o : observers_) o->OnRateLimited(seconds);
  }

 private:
  std::vector<AttemptObserver*> observers_;
};

}  // namespace streamcar::runtime
