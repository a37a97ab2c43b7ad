#pragma once
// Durations of the configuration file: "<number><unit>" with ms, s, m, h, combinable ("1m30s").

#include <optional>
#include <string>
#include <string_view>

#include "sidecar/common/clock.h"

namespace streamcar {

// Returns the duration, or nullopt with *error saying what is wrong. A bare number, a negative
// number and an unknown unit are errors, never silent defaults.
std::optional<Millis> ParseDuration(std::string_view text, std::string* error);

// The canonical spelling: "0s", "250ms", "1m30s", "2h".
std::string FormatDuration(Millis value);

}  // namespace streamcar
