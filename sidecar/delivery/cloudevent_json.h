#pragma once
// One entry as a CloudEvents 1.0 event in the JSON event format (structured mode, SPEC 11):
// formats `cloudevents-structured` and `dapr`. The attributes are those of the binary mode
// (encoder.cc, SPEC 3.1), derived the same way; here they are JSON strings, so entry data is
// JSON-escaped by the writer instead of percent-encoded. Pure code.

#include <string>

#include "sidecar/common/stream_entry.h"
#include "sidecar/delivery/encoder.h"
#include "sidecar/delivery/entry_trace.h"
#include "sidecar/delivery/published_event.h"

namespace streamcar::delivery {

// What format dapr adds to an event (SPEC 11).
struct DaprParts {
  // The event a Dapr publisher wrote into the entry (published_event.h), null when none: it is
  // delivered as the same event as any other entry, its data and the attributes describing it
  // taken over, the attributes streamcar asserts (id, source, specversion, time, topic,
  // pubsubname, the trace) streamcar's.
  const PublishedEvent* published = nullptr;
  // The trace the delivery continues (entry_trace.h), null when none.
  const TraceContext* trace = nullptr;
};

// Writes the event object of `entry` to *event: specversion 1.0, id (the entry id), source
// (/streams/<stream>), type (the entry's "type" field, else "streamcar.entry"), time (of the
// entry id), then the data:
// - with the entry's raw_field: its bytes, described by the entry's content_type (an invalid
//   media type refuses the entry). A JSON media type (application/json, */*+json) whose bytes
//   parse as JSON is written as that JSON value; application/octet-stream, bytes that are not
//   UTF-8 and JSON-typed bytes that do not parse are written base64 in data_base64 (the exact
//   bytes arrive, and no receiver misreads them); any other text is a JSON string in data.
//   Without a content_type: UTF-8 text that is not JSON is a text/plain string in data, anything
//   else application/octet-stream in data_base64.
// - without it: the json format's payload object, datacontenttype application/json; a field
//   whose values are base64 is named in *base64_header (as in binary mode's
//   Streamcar-Base64-Fields), left empty otherwise.
// `dapr` (null for cloudevents-structured) adds Dapr's attributes: topic (the subscription's
// stream: a sharded subscription's, not the shard's), pubsubname (the group), and traceparent,
// traceid (Dapr's older name for it) and tracestate of dapr->trace.
// Returns false and sets *why when the entry cannot be expressed (its content_type).
bool EncodeCloudEvent(const EncodeContext& context, const StreamEntry& entry, const DaprParts* dapr,
                      std::string* event, std::string* base64_header, std::string* why);

}  // namespace streamcar::delivery
