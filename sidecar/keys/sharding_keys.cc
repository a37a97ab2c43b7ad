#include "sidecar/keys/sharding_keys.h"

#include <zlib.h>

#include <algorithm>

#include "sidecar/keys/stream_keys.h"

namespace streamcar::keys {

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

int ShardOf(std::string_view key, int shards) {
  // zlib's crc32 takes a uInt length: longer keys are fed in pieces (the CRC continues).
  uLong crc = crc32(0L, Z_NULL, 0);
  while (!key.empty()) {
    const auto piece = static_cast<uInt>(std::min<size_t>(key.size(), 1U << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(key.data()), piece);
    key.remove_prefix(piece);
  }
  return static_cast<int>(crc % static_cast<uLong>(shards));
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
  return std::string(shard_key).append(":").append(kDeadLetterSuffix);
}

}  // namespace streamcar::keys
