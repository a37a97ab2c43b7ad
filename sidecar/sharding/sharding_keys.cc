#include "sidecar/sharding/sharding_keys.h"

namespace streamcar::sharding {

std::vector<std::string_view> CoordinatorKeys::InOrder() const {
  return {meta, members, sessions, target, owner, tokens, instances, progress, free, events};
}

CoordinatorKeys CoordinatorKeysFor(std::string_view stream, std::string_view group) {
  const std::string prefix = "sc:{" + std::string(stream) + ":" + std::string(group) + "}:";
  return {.meta = prefix + "meta",
          .members = prefix + "members",
          .sessions = prefix + "sessions",
          .target = prefix + "target",
          .owner = prefix + "owner",
          .tokens = prefix + "tokens",
          .instances = prefix + "instances",
          .progress = prefix + "progress",
          .free = prefix + "free",
          .events = prefix + "events"};
}

std::string DefaultKeyPattern(std::string_view stream) { return std::string(stream) + ":{%d}"; }

std::string ShardKey(std::string_view key_pattern, int shard) {
  std::string key(key_pattern);
  const size_t at = key.find("%d");
  if (at != std::string::npos) key.replace(at, 2, std::to_string(shard));
  return key;
}

std::string FenceKey(std::string_view shard_key, std::string_view group) {
  return std::string(shard_key) + ":sc:" + std::string(group) + ":fence";
}

std::string ShardDeadLetterKey(std::string_view shard_key) {
  return std::string(shard_key) + ":dlq";
}

}  // namespace streamcar::sharding
