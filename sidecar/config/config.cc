#include "sidecar/config/config.h"

#include <array>
#include <cctype>

namespace streamcar::config {

bool IsSensitiveHeader(std::string_view name) {
  static constexpr std::array<std::string_view, 10> kMarks = {
      "auth",   "token",  "secret",  "key",       "password",
      "passwd", "cookie", "session", "signature", "credential"};
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (auto mark : kMarks) {
    if (lower.find(mark) != std::string::npos) return true;
  }
  return false;
}

const char* FormatName(Format format) {
  switch (format) {
    case Format::kJson:
      return "json";
    case Format::kRaw:
      return "raw";
    case Format::kCloudEvents:
      return "cloudevents";
  }
  return "json";
}

std::string Subscription::StartId() const {
  if (start == "new") return "$";
  if (start == "beginning") return "0";
  return start;
}

}  // namespace streamcar::config
