#include "sidecar/log/api_route.h"

#include "sidecar/common/text.h"

namespace streamcar::log {
StatusOr<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+' && plus_is_space) {
      out += ' ';
    } else if (c != '%') {
      out += c;
    } else {
      const int high = i + 1 < text.size() ? HexDigitValue(text[i + 1]) : -1;
      const int low = i + 2 < text.size() ? HexDigitValue(text[i + 2]) : -1;
      if (high < 0 || low < 0) return Status(StatusCode::kInvalid, "malformed percent-escape");
      out += static_cast<char>(high * 16 + low);
      i += 2;
    }
  }
  return out;
}

StatusOr<std::optional<std::string>> StreamOfPath(std::string_view path) {
  static constexpr std::string_view kPrefix = "/v1/streams/";
  static constexpr std::string_view kSuffix = "/entries";
  if (!path.starts_with(kPrefix) || !path.ends_with(kSuffix) ||
      path.size() <= kPrefix.size() + kSuffix.size()) {
    return std::optional<std::string>();
  }
  const std::string_view encoded =
      path.substr(kPrefix.size(), path.size() - kPrefix.size() - kSuffix.size());
  // One path segment: a '/' in a name must be sent as %2F.
  if (encoded.find('/') != std::string_view::npos) return std::optional<std::string>();
  auto name = PercentDecode(encoded, /*plus_is_space=*/false);
  if (!name.ok()) return name.status();
  return std::optional<std::string>(std::move(*name));
}

StatusOr<std::vector<std::pair<std::string, std::string>>> ParseQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    auto name = PercentDecode(item.substr(0, eq), true);
    auto value = PercentDecode(eq == std::string_view::npos ? "" : item.substr(eq + 1), true);
    if (!name.ok()) return name.status();
    if (!value.ok()) return value.status();
    out.emplace_back(std::move(*name), std::move(*value));
  }
  return out;
}

}  // namespace streamcar::log
