#pragma once
// The parts of an entry's request body that more than one format shares (encoder.cc defines
// them; cloudevent_json.cc uses them too), so each rule is written once.

#include <string>

#include "sidecar/common/stream_entry.h"

namespace streamcar::delivery {

// The payload object alone, {"field":"value",...} as in the json format. It has no room for
// base64_fields, so that list is appended to *base64_header: comma-separated field names, each
// percent-encoded like a CloudEvents attribute (and ',' too), since names are entry data.
std::string PayloadObject(const StreamEntry& entry, std::string* base64_header);

// The entry's content_type for a body taken from raw_field: absent means
// application/octet-stream; present, it must be an RFC 9110 media type or the entry is refused
// (false, *why set): it would otherwise be framing.
bool BodyContentType(const StreamEntry& entry, std::string* content_type, std::string* why);

}  // namespace streamcar::delivery
