#include "sidecar/common/size.h"

#include <cctype>

namespace streamcar {
namespace {

// Larger than any memory budget a sidecar could hold; keeps the arithmetic far from overflow.
constexpr uint64_t kMaxSize = uint64_t{1} << 40;  // 1024GiB

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = kKiB * 1024;
constexpr uint64_t kGiB = kMiB * 1024;

std::optional<uint64_t> UnitBytes(std::string_view unit) {
  if (unit == "B") return 1;
  if (unit == "KiB") return kKiB;
  if (unit == "MiB") return kMiB;
  if (unit == "GiB") return kGiB;
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> ParseSize(std::string_view text, std::string* error) {
  auto fail = [&](std::string message) -> std::optional<uint64_t> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  const std::string quoted = "\"" + std::string(text) + "\"";
  if (text.empty()) return fail("empty size (write e.g. 32MiB, 512KiB, 1GiB)");
  if (text.front() == '-') return fail("negative size " + quoted);
  size_t pos = 0;
  uint64_t number = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    number = number * 10 + static_cast<uint64_t>(text[pos] - '0');
    if (number > kMaxSize) return fail("size " + quoted + " is too large (at most 1024GiB)");
    ++pos;
  }
  if (pos == 0) {
    return fail("invalid size " + quoted +
                " (write <number><unit> with units B, KiB, MiB, GiB, e.g. 32MiB)");
  }
  const std::string_view unit = text.substr(pos);
  if (unit.empty()) {
    return fail("size " + quoted + " has no unit (write e.g. " + std::string(text) + "MiB or " +
                std::string(text) + "B)");
  }
  auto factor = UnitBytes(unit);
  if (!factor) {
    return fail("size " + quoted + " has unknown unit \"" + std::string(unit) +
                "\" (units: B, KiB, MiB, GiB)");
  }
  if (number > kMaxSize / *factor)
    return fail("size " + quoted + " is too large (at most 1024GiB)");
  return number * *factor;
}

std::string FormatSize(uint64_t bytes) {
  if (bytes != 0) {
    if (bytes % kGiB == 0) return std::to_string(bytes / kGiB) + "GiB";
    if (bytes % kMiB == 0) return std::to_string(bytes / kMiB) + "MiB";
    if (bytes % kKiB == 0) return std::to_string(bytes / kKiB) + "KiB";
  }
  return std::to_string(bytes) + "B";
}

}  // namespace streamcar
