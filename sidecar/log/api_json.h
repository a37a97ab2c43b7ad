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

// An entry's fields, in order (a name may repeat).
using EntryFields = std::vector<std::pair<std::string, std::string>>;

// A JSON object body as entry fields, in the object's order: string values as they are
// (unescaped); numbers, booleans, null, arrays and objects as their JSON text (whitespace
// outside strings removed, numbers exactly as written). kInvalid
// saying why for anything else: malformed JSON, text after the value, invalid UTF-8, a value
// that is not an object, or an empty object (an entry needs a field).
StatusOr<EntryFields> FieldsFromJson(std::string_view body);

// Whether a JSON body is an array (its first character after blanks is '['): a batch append.
bool IsJsonArray(std::string_view body);
// A batch body: a JSON array of entry objects, each read as FieldsFromJson reads one. kInvalid
// as FieldsFromJson, and for an element that is not an object, an empty object or an empty array.
StatusOr<std::vector<EntryFields>> EntriesFromJson(std::string_view body);

// The error of an explicit id too far ahead of Redis's clock or the maximum id (SPEC 10).
inline constexpr std::string_view kIdOutOfRange = "id_out_of_range";

// For a non-monotonic id, {"error":"nonmonotonic","top":"<id>"} (other errors: http/json_error.h).
std::string NonMonotonicJson(std::string_view top);
// {"id":"<id>","stream":"<name>"}
std::string ReceiptJson(std::string_view id, std::string_view stream);
// {"stream":"<name>","ids":["<id>",...]}: a batch's receipts, one id per entry in order (SPEC 10).
std::string BatchReceiptsJson(const std::vector<std::string>& ids, std::string_view stream);
// {"entries":[...],"next":"<id>"|null}
std::string PageJson(const std::vector<StreamEntry>& entries,
                     const std::optional<std::string>& next);

}  // namespace streamcar::log
