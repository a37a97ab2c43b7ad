#pragma once
// An entry a Dapr publisher wrote (SPEC 11, docs/coming-from-dapr.md): Dapr's redis component
// XADDs the whole CloudEvent it published as the entry's `data` field. Format dapr delivers it as
// "the same event" as every other entry: the attributes streamcar asserts (id, source,
// specversion, time, topic, pubsubname) are streamcar's, whatever the entry says, because entry
// data is untrusted input; the published event contributes its data and the attributes that
// describe it. Its traceparent is the producer's trace (entry_trace.h). Pure code.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/stream_entry.h"
#include "sidecar/config/config.h"

namespace streamcar::delivery {

struct PublishedEvent {
  // The published event's type, "" when it has none (streamcar's default type is used then).
  std::string type;
  // The other top-level members the delivered event takes over, in the published order, each
  // value re-written by streamcar's own JSON writer (numbers as spelled): data or data_base64,
  // datacontenttype, subject, dataschema, and extension attributes (lowercase letters and
  // digits, a string, number or boolean value) that are none of streamcar's or Dapr's.
  std::vector<std::pair<std::string, std::string>> members;
  // The published event's own trace context, "" when absent (not yet checked for W3C syntax).
  std::string traceparent;
  std::string tracestate;
};

// The published event in `entry` when format dapr reads one there: the entry's
// handler.raw_field holds a JSON object with a "specversion" string, and the entry has no
// content_type or application/cloudevents+json. nullopt otherwise — also for an object that is
// no well-formed event (a key given twice, a non-string value where the CloudEvents JSON format
// or Dapr requires a string, data and data_base64 both), which is then delivered as plain data.
std::optional<PublishedEvent> FindPublishedEvent(const config::HandlerConfig& handler,
                                                 const StreamEntry& entry);

}  // namespace streamcar::delivery
