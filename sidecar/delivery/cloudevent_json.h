#pragma once
// One entry as a CloudEvents 1.0 event in the JSON event format (structured mode, SPEC 11):
// formats `cloudevents-structured` and `dapr`. The attributes are those of the binary mode
// (encoder.cc, SPEC 3.1), derived the same way; here they are JSON strings, so entry data is
// JSON-escaped by the writer instead of percent-encoded. Pure code.

#include <string>

#include "sidecar/common/stream_entry.h"
#include "sidecar/delivery/encoder.h"

namespace streamcar::delivery {

// Writes the event object of `entry` to *event. The data:
// - with the entry's raw_field: its bytes, described by the entry's content_type (default
//   application/octet-stream; an invalid media type refuses the entry). A JSON media type
//   (application/json, */*+json) whose bytes parse as JSON is written as that JSON value;
//   application/octet-stream, bytes that are not UTF-8 and JSON-typed bytes that do not parse are
//   written base64 in data_base64 (the exact bytes arrive, and no receiver misreads them); any
//   other text is a JSON string in data.
// - without it: the json format's payload object, datacontenttype application/json; a field
//   whose values are base64 is named in *base64_header (as in binary mode's
//   Streamcar-Base64-Fields), left empty otherwise.
// `dapr` adds Dapr's attributes: topic (the stream), pubsubname (the group), and traceparent,
// traceid (Dapr's older name for it) and tracestate when the entry carries valid ones. An entry a
// Dapr publisher wrote (its raw_field holds a whole CloudEvent JSON object, with no content_type
// or application/cloudevents+json) is that event, passed on as Dapr's runtime passes it: its own
// attributes and data kept, Dapr's attributes set as above.
// Returns false and sets *why when the entry cannot be expressed (its content_type).
bool EncodeCloudEvent(const EncodeContext& context, const StreamEntry& entry, bool dapr,
                      std::string* event, std::string* base64_header, std::string* why);

}  // namespace streamcar::delivery
