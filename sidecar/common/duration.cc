#include "sidecar/common/duration.h"

#include <cctype>
#include <cstdint>
#include <limits>

namespace streamcar {
namespace {

std::optional<int64_t> UnitMillis(std::string_view unit) {
  if (unit == "ms") return 1;
  if (unit == "s") return 1000;
  if (unit == "m") return 60'000;
  if (unit == "h") return 3'600'000;
  return std::nullopt;
}

}  // namespace

std::optional<Millis> ParseDuration(std::string_view text, std::string* error) {
  auto fail = [&](std::string message) -> std::optional<Millis> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  if (text.empty()) return fail("empty duration (write e.g. 10s, 500ms, 1m30s)");
  if (text.front() == '-') return fail("negative duration \"" + std::string(text) + "\"");
  int64_t total = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t digits_start = pos;
    int64_t number = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      number = number * 10 + (text[pos] - '0');
      if (number > std::numeric_limits<int32_t>::max()) {
        return fail("duration \"" + std::string(text) + "\" is too large");
      }
      ++pos;
    }
    if (pos == digits_start) {
      return fail("invalid duration \"" + std::string(text) +
                  "\" (write <number><unit> with units ms, s, m, h, e.g. 1m30s)");
    }
    size_t unit_start = pos;
    while (pos < text.size() && std::isalpha(static_cast<unsigned char>(text[pos]))) ++pos;
    std::string_view unit = text.substr(unit_start, pos - unit_start);
    if (unit.empty()) {
      return fail("duration \"" + std::string(text) + "\" has no unit (write e.g. " +
                  std::string(text) + "s or " + std::string(text) + "ms)");
    }
    auto factor = UnitMillis(unit);
    if (!factor) {
      return fail("duration \"" + std::string(text) + "\" has unknown unit \"" + std::string(unit) +
                  "\" (units: ms, s, m, h)");
    }
    total += number * *factor;
    if (total > int64_t{365} * 24 * 3'600'000) {
      return fail("duration \"" + std::string(text) + "\" is too large");
    }
  }
  return Millis(total);
}

std::string FormatDuration(Millis value) {
  int64_t ms = value.count();
  if (ms == 0) return "0s";
  std::string out;
  auto take = [&](int64_t unit, const char* suffix) {
    if (ms >= unit) {
      out += std::to_string(ms / unit) + suffix;
      ms %= unit;
    }
  };
  take(3'600'000, "h");
  take(60'000, "m");
  take(1000, "s");
  take(1, "ms");
  return out;
}

}  // namespace streamcar
