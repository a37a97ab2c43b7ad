#pragma once
// Byte sizes of the configuration file: "<number><unit>" with units B, KiB, MiB, GiB (powers of
// 1024), e.g. 32MiB. Written like durations (duration.h): one whole number and one unit.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace streamcar {

// Returns the size in bytes, or nullopt with *error saying what is wrong. A bare number, a
// negative number, a fraction and an unknown unit are errors, never silent defaults.
std::optional<uint64_t> ParseSize(std::string_view text, std::string* error);

// The canonical spelling: the largest unit that divides the size exactly ("32MiB", "1536B").
std::string FormatSize(uint64_t bytes);

}  // namespace streamcar
