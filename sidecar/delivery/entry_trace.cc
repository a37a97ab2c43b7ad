#include "sidecar/delivery/entry_trace.h"

#include "sidecar/delivery/header_values.h"

namespace streamcar::delivery {
namespace {

std::optional<TraceContext> Checked(const std::string& traceparent, const std::string* tracestate) {
  if (!IsValidTraceparent(traceparent)) return std::nullopt;
  TraceContext trace{traceparent, ""};
  if (tracestate != nullptr && IsValidTracestate(*tracestate)) trace.tracestate = *tracestate;
  return trace;
}

}  // namespace

std::optional<TraceContext> EntryTrace(const StreamEntry& entry, const PublishedEvent* published) {
  if (const std::string* traceparent = entry.Find("traceparent"); traceparent != nullptr) {
    if (auto trace = Checked(*traceparent, entry.Find("tracestate"))) return trace;
  }
  if (published == nullptr || published->traceparent.empty()) return std::nullopt;
  return Checked(published->traceparent, &published->tracestate);
}

std::optional<TraceContext> EntryTrace(const config::HandlerConfig& handler,
                                       const StreamEntry& entry) {
  const std::optional<PublishedEvent> published = FindPublishedEvent(handler, entry);
  return EntryTrace(entry, published ? &*published : nullptr);
}

}  // namespace streamcar::delivery
