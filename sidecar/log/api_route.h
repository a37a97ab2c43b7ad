#pragma once
// The log API's targets (SPEC section 10): /v1/streams/{name}/entries and its query string.
// Pure code, unit-tested.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sidecar/common/status.h"

namespace streamcar::log {

// Decodes %XX escapes (and '+' as a space when `plus_is_space`, as in a query string). kInvalid
// for a '%' not followed by two hex digits.
StatusOr<std::string> PercentDecode(std::string_view text, bool plus_is_space);

// The stream name of "/v1/streams/{name}/entries" (the name percent-decoded, so any stream name
// can be addressed), nullopt for any other path; kInvalid for a malformed escape.
StatusOr<std::optional<std::string>> StreamOfPath(std::string_view path);

// "a=1&b=x%20y" as decoded pairs in order; kInvalid for a malformed escape.
StatusOr<std::vector<std::pair<std::string, std::string>>> ParseQuery(std::string_view query);

}  // namespace streamcar::log
