#include "sidecar/log/archive_keys.h"

namespace streamcar::log {

std::string_view HashTagOf(std::string_view key) {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return {};
  const auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return {};
  return key.substr(open + 1, close - open - 1);
}

std::string SameSlotPrefix(std::string_view stream) {
  if (!HashTagOf(stream).empty()) return std::string(stream) + ":";
  return "{" + std::string(stream) + "}:";
}

ArchiveKeys ArchiveKeysOf(std::string_view stream) {
  const std::string prefix = SameSlotPrefix(stream) + "archive:";
  return {prefix + "lease", prefix + "token", prefix + "watermark"};
}

}  // namespace streamcar::log
