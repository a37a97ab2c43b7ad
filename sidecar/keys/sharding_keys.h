#pragma once
// The Redis keys of a sharded subscription (SHARDING.md B2), spelled in this file only.
//
// The coordinator's keys share one hash tag per (logical stream, group), so one script touches
// all of them in one slot: sc:{orders:billing}:meta and so on. A shard's data-plane keys share
// the shard's own tag: orders:{3}, orders:{3}:sc:billing:fence, orders:{3}:dlq.

#include <string>
#include <string_view>
#include <vector>

namespace streamcar::keys {

struct CoordinatorKeys {
  std::string meta;       // HASH: schema, shard count, epochs, fence_seq, timing of targets
  std::string members;    // HASH: member id -> JSON record
  std::string sessions;   // ZSET: member id -> session (or rebalance) deadline, Redis TIME ms
  std::string target;     // HASH: shard -> member id (target assignment)
  std::string owner;      // HASH: shard -> member id (current grant, revoking included)
  std::string tokens;     // HASH: shard -> fence token of the current grant
  std::string instances;  // HASH: instance id -> member id (static membership)
  std::string progress;   // HASH: shard -> a ProgressRow (heartbeat.h)
  std::string free;       // HASH: shard -> Redis TIME ms since it has had no owner
  std::string events;     // STREAM: the audit trail

  // In the order the heartbeat script takes them as KEYS.
  std::vector<std::string_view> InOrder() const;
};

CoordinatorKeys CoordinatorKeysFor(std::string_view stream, std::string_view group);

// What the configuration must check, as these functions assume it (SHARDING.md B1):
// - a key pattern holds exactly one "%d", inside its hash tag (else shards share keys or slots);
// - two sharded subscriptions never share coordinator keys: ("orders:eu", "billing") and
//   ("orders", "eu:billing") both give sc:{orders:eu:billing}:...

// At most this many shards per subscription: the configuration's limit, and the heartbeat
// script's (its writes are chunked, but a member's request and reply carry every shard it holds).
inline constexpr int kMaxShards = 4096;

// The shard of a producer's key (SPEC 9): crc32(key) mod shards, CRC-32/IEEE as zlib's crc32
// computes it, so that producers in every language route a key alike.
int ShardOf(std::string_view key, int shards);

// "<stream>:{%d}": each shard its own hash tag, so shards spread over a cluster's slots.
std::string DefaultKeyPattern(std::string_view stream);
// The pattern with its "%d" replaced by the shard index.
std::string ShardKey(std::string_view key_pattern, int shard);
// The shard's fence: the token installed by its current owner. Only ever moves forward.
std::string FenceKey(std::string_view shard_key, std::string_view group);
// The shard's own dead-letter stream, in the shard's slot (DLQ write and ack are one step).
std::string ShardDeadLetterKey(std::string_view shard_key);

}  // namespace streamcar::keys
