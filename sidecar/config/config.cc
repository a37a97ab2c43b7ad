#include "sidecar/config/config.h"

#include <array>
#include <cctype>

#include "sidecar/common/url.h"
#include "sidecar/keys/sharding_keys.h"

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

bool AsksAppForDaprRoutes(const HandlerConfig& handler) {
  if (handler.format != Format::kDapr) return false;
  std::string error;
  const auto url = ParseUrl(handler.url, &error);
  return url && (url->path.empty() || url->path == "/");
}

const char* FormatName(Format format) {
  for (const auto& [name, value] : kFormatNames) {
    if (value == format) return name.data();  // the names are literals: NUL-terminated
  }
  return kFormatNames[0].first.data();
}

const char* RedisModeName(RedisMode mode) {
  for (const auto& [name, value] : kRedisModeNames) {
    if (value == mode) return name.data();  // the names are literals: NUL-terminated
  }
  return kRedisModeNames[0].first.data();
}

RedisConfig::RedisConfig() {
  std::string error;
  if (auto parsed = ParseRedisUrl(url, &error)) endpoint = *parsed;
}

std::string Subscription::StartId() const {
  if (start == "new") return "$";
  if (start == "beginning") return "0";
  return start;
}

void FillShardRoutingOf(const Config& config, LogStream* stream) {
  for (const auto& sub : config.subscriptions) {
    if (!sub.sharding.enabled() || sub.stream != stream->name) continue;
    stream->shards = sub.sharding.shards;
    stream->shard_key_pattern = sub.ShardKeyPattern();
  }
}

void FillShardRouting(Config* config) {
  for (auto& stream : config->streams) FillShardRoutingOf(*config, &stream);
}

std::string Subscription::ShardKeyPattern() const {
  return sharding.key_pattern.empty() ? keys::DefaultKeyPattern(stream) : sharding.key_pattern;
}

}  // namespace streamcar::config
