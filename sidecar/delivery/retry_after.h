#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "sidecar/common/clock.h"

namespace streamcar {

// A Retry-After header value: delay-seconds ("120") or an HTTP-date ("Wed, 21 Oct 2015 07:28:00
// GMT", also the obsolete RFC 850 and asctime forms), relative to `now_unix_ms`. A date in the past
// is zero delay. nullopt when the value is neither.
std::optional<Millis> ParseRetryAfter(std::string_view value, int64_t now_unix_ms);

}  // namespace streamcar
