#include "sidecar/delivery/retry_after.h"

#include <cctype>
#include <charconv>
#include <ctime>
#include <string>

namespace streamcar {

std::optional<Millis> ParseRetryAfter(std::string_view value, int64_t now_unix_ms) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front())))
    value.remove_prefix(1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())))
    value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(value.front()))) {
    int64_t seconds = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (ec != std::errc() || end != value.data() + value.size()) return std::nullopt;
    if (seconds > int64_t{365} * 24 * 3600) seconds = int64_t{365} * 24 * 3600;
    return Millis(seconds * 1000);
  }
  const std::string text(value);
  static constexpr const char* kFormats[] = {
      "%a, %d %b %Y %H:%M:%S GMT",  // IMF-fixdate
      "%A, %d-%b-%y %H:%M:%S GMT",  // RFC 850
      "%a %b %d %H:%M:%S %Y",       // asctime
  };
  for (const char* format : kFormats) {
    std::tm tm{};
    const char* end = strptime(text.c_str(), format, &tm);
    if (end == nullptr || *end != '\0') continue;
    const int64_t at_ms = static_cast<int64_t>(timegm(&tm)) * 1000;
    return Millis(at_ms > now_unix_ms ? at_ms - now_unix_ms : 0);
  }
  return std::nullopt;
}

}  // namespace streamcar
