#pragma once
// Which trace a delivery of an entry continues (SPEC 3.1, 11) — one rule, used by the encoder
// (the traceparent header, Dapr's traceparent attribute) and by the tracing observer (the span's
// parent, telemetry/tracing_observer.cc), so that the span and what the handler receives never
// disagree about the producer. Pure code.

#include <optional>
#include <string>

#include "sidecar/common/stream_entry.h"
#include "sidecar/config/config.h"
#include "sidecar/delivery/published_event.h"

namespace streamcar::delivery {

struct TraceContext {
  std::string traceparent;  // valid W3C (header_values.h IsValidTraceparent)
  std::string tracestate;   // valid W3C, or "" (none, or an invalid one left out)
};

// The entry's own "traceparent" field when it is valid W3C, with its "tracestate" field when
// that is valid. Else the traceparent (and tracestate) of the Dapr-published event the entry
// holds (`published`, published_event.h; null when it holds none), likewise checked: Dapr puts
// the producer's trace in the event, not in a field of the entry. nullopt when neither has one:
// an invalid one is left out, as the W3C recommendation says.
std::optional<TraceContext> EntryTrace(const StreamEntry& entry, const PublishedEvent* published);

// The same, finding the published event itself (format dapr only): for callers that have not
// looked for it already.
std::optional<TraceContext> EntryTrace(const config::HandlerConfig& handler,
                                       const StreamEntry& entry);

}  // namespace streamcar::delivery
