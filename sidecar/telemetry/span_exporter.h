#pragma once
// Finished spans to an OTLP/HTTP collector: a bounded queue that any loop thread submits to
// without waiting, and one thread of its own that owns the connection and sends the queue in
// batches. A slow, hanging or unreachable collector costs queued spans, never delivery time: a
// full queue drops the span (counted), and every export is bounded by a timeout.
//
// Threads: Submit from any thread; Shutdown and the destructor from the owner's.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/delivery/http_target.h"
#include "sidecar/telemetry/span.h"

namespace streamcar::telemetry {

struct ExporterOptions {
  std::string endpoint;  // tracing.otlp_endpoint: http://host:port/path
  std::string service_name;
  std::string version;           // the instrumentation scope's version (streamcar's)
  size_t queue_capacity = 2048;  // spans held at most; more are dropped
  size_t max_batch = 512;        // spans per export request
  Millis interval{500};          // a partial batch waits at most this long
  Millis export_timeout{3000};   // one POST: connect, send, answer
  int max_tries = 3;             // a retryable failure (no answer, 429, 502, 503, 504) is retried
  Millis retry_backoff{200};     // doubled after each try
  // Counts spans that never reach the collector: the queue was full, or their export failed
  // after its tries (streamcar_spans_dropped_total). Called on any thread.
  std::function<void(size_t)> dropped;
};

class SpanExporter final : public SpanSink {
 public:
  // Starts the export thread.
  explicit SpanExporter(ExporterOptions options);
  ~SpanExporter() override;
  SpanExporter(const SpanExporter&) = delete;
  SpanExporter& operator=(const SpanExporter&) = delete;

  // Queues `span`, or drops and counts it when the queue is full. Never blocks on I/O.
  void Submit(Span span) override;
  // Sends what is queued, in batches, until `deadline` (no retry waits past it); then stops the
  // thread. What is still queued then is dropped and counted. Idempotent.
  void Shutdown(SteadyTime deadline);

 private:
  void Run();
  // One batch, tried up to max_tries times, none past shutdown's deadline; false when it was not
  // delivered (the caller counts it dropped).
  bool Export(const std::vector<Span>& batch);
  // Shutdown's deadline once it began; SteadyTime::max() before.
  SteadyTime Deadline();

  const ExporterOptions options_;
  const delivery::HttpTarget target_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Span> queue_;
  bool stopping_ = false;
  SteadyTime stop_deadline_{};
  SteadyTime next_warning_{};  // the export thread's
  std::thread thread_;
};

}  // namespace streamcar::telemetry
