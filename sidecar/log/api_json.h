#pragma once
// The JSON bodies of the log API (SPEC section 10). Pure code, unit-tested.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sidecar/common/status.h"
#include "sidecar/common/stream_entry.h"

namespace streamcar::log {

// A JSON object body as entry fields, in the object's order: string values as they are
// (unescaped); numbers, booleans, null, arrays and objects as their JSON text (whitespace
// outside strings removed, numbers exactly as written). kInvalid
// saying why for anything else: malformed JSON, text after the value, invalid UTF-8, a value
// that is not an object, or an empty object (an entry needs a field).
StatusOr<std::vector<std::pair<std::string, std::string>>> FieldsFromJson(std::string_view body);

// {"error":"<message>"} and, for a non-monotonic id, {"error":"nonmonotonic","top":"<id>"}.
std::string ErrorJson(std::string_view message);
std::string NonMonotonicJson(std::string_view top);
// {"id":"<id>","stream":"<name>"}
std::string ReceiptJson(std::string_view id, std::string_view stream);
// {"entries":[...],"next":"<id>"|null}
std::string PageJson(const std::vector<StreamEntry>& entries,
                     const std::optional<std::string>& next);

}  // namespace streamcar::log
