#pragma once
// One finished span as the OTLP exporter sends it (opentelemetry/proto/trace/v1/trace.proto):
// the few fields a delivery attempt fills. Ids are raw bytes: 16 for a trace, 8 for a span.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace streamcar::telemetry {

struct SpanAttribute {
  std::string key;
  std::variant<std::string, int64_t> value;
};

// Another trace's span this one is about (a batch request's entries: docs/tracing.md).
struct SpanLink {
  std::string trace_id;  // 16 bytes
  std::string span_id;   // 8 bytes
};

struct Span {
  std::string trace_id;        // 16 bytes
  std::string span_id;         // 8 bytes
  std::string parent_span_id;  // 8 bytes, or empty for a root span
  std::string name;
  uint64_t start_unix_nano = 0;
  uint64_t end_unix_nano = 0;
  std::vector<SpanAttribute> attributes;
  std::vector<SpanLink> links;
  bool error = false;          // Status.code ERROR; otherwise UNSET
  std::string status_message;  // with an error
};

// Where finished spans go (telemetry/span_exporter.h; a test's vector). Any thread; never blocks.
class SpanSink {
 public:
  virtual ~SpanSink() = default;
  virtual void Submit(Span span) = 0;
};

}  // namespace streamcar::telemetry
