#pragma once
// A span per delivery attempt (SPEC 11, docs/tracing.md) as an attempt observer: OnStarted opens
// it and gives the request the span's own traceparent, OnEnded closes it with the answer and
// hands it to a SpanSink (the exporter's queue). A refused connection is not an attempt: its span
// is dropped unsent.
//
// One entry per request: the span is a child of the entry's traceparent when it has a valid one
// whose sampled flag is set (delivery/entry_trace.h: the entry's field, or with format dapr the
// traceparent of the Dapr-published event it holds — the one the encoder forwards); an entry whose
// traceparent is not sampled gets no span (its traceparent goes to the handler as it is); an entry
// without one starts a trace, sampled by `sample_ratio` (on the trace id, as OpenTelemetry's
// TraceIdRatioBased). A batch request is one span, a root with a link to each entry's traceparent,
// recorded when any of them is sampled, else by `sample_ratio`.
//
// Loop thread only (attempt_observer.h); the sink takes spans from any thread.

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/config/config.h"
#include "sidecar/delivery/outcome.h"
#include "sidecar/runtime/attempt_observer.h"
#include "sidecar/telemetry/span.h"

namespace streamcar::telemetry {

class TracingObserver final : public runtime::AttemptObserver {
 public:
  // `subscription`, `sink` and `clock` outlive the observer.
  TracingObserver(const config::Subscription& subscription, double sample_ratio, SpanSink* sink,
                  const Clock& clock);

  void OnStarted(const runtime::OutgoingRequest& outgoing, SteadyTime now) override;
  void OnEnded(std::span<const runtime::EntryRef> refs, const delivery::HandlerResponse& response,
               SteadyTime started, SteadyTime now) override;

 private:
  struct OpenSpan {
    Span span;
    std::vector<delivery::BatchItem> items;  // ids point into `ids`
    std::vector<std::string> ids;
  };

  bool Sampled(const std::string& trace_id) const;
  std::string RandomBytes(size_t count);
  // Wall-clock nanoseconds of a steady time: durations from the monotonic clock, anchored to the
  // wall clock (re-anchored when the wall clock was stepped by more than 2 ms).
  uint64_t UnixNanos(SteadyTime at);
  static std::string Key(const runtime::EntryRef& ref);

  const config::Subscription& sub_;
  const double sample_ratio_;
  SpanSink* sink_;
  const Clock& clock_;
  const delivery::OutcomePolicy policy_;
  const std::string name_;
  std::mt19937_64 random_;
  SteadyTime anchor_steady_;
  int64_t anchor_wall_ms_;
  // Requests in flight with a recorded span, by their first entry (one request at a time holds
  // an entry).
  std::unordered_map<std::string, OpenSpan> open_;
};

}  // namespace streamcar::telemetry
