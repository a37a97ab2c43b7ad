#pragma once
// The operations of one shard of a sharded subscription (SHARDING.md B5) as pure pairs, like
// redis/stream_ops.h: a builder of the fenced script's call and a parser of its reply. Each step
// carries the fence token of the member's grant; Redis compares it with the shard's installed
// token in the same step, so a replaced owner is refused ("fenced") wherever it acts.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/dead_letter_record.h"
#include "sidecar/redis/entry.h"
#include "sidecar/redis/reply.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::sharding {

// What a fenced step found: done, with its value, or refused because another token is installed.
template <typename T>
struct Fenced {
  std::optional<int64_t> installed_instead;  // set: refused; the token installed on the shard
  T value{};
  bool done() const { return !installed_instead.has_value(); }
};

// A fenced read: entries, or none with the shard's tail id (the next wait's starting point).
struct FencedRead {
  std::vector<StreamEntry> entries;
  std::string tail_id;  // set when entries is empty: the last id in the stream, or "0-0"
};

class FencedOps {
 public:
  // `shard_key`, its fence and dead-letter keys come from sharding_keys.h.
  FencedOps(std::string shard_key, std::string group, std::string consumer);

  const std::string& shard_key() const { return shard_key_; }
  const std::string& fence_key() const { return fence_key_; }
  const std::string& dead_letter_key() const { return dead_letter_key_; }

  // Installs `token` as the shard's fence for `member` (refused when a higher token, or the same
  // token of another member, is installed), then creates the group at `start_id` unless it
  // exists. ParseInstall: the token, or the installed one instead.
  redis::Command Install(int64_t token, std::string_view member, int64_t member_epoch,
                         std::string_view start_id) const;
  // Every pending entry of the shard, whoever read it (min-idle 0), from `cursor`, claimed to
  // this consumer: takeover (SHARDING.md B5). ParseClaimAll.
  redis::Command ClaimAll(int64_t token, std::string_view cursor, int count) const;
  // New entries ('>'), without blocking. ParseRead.
  redis::Command Read(int64_t token, int count) const;
  // The wait for new entries, which changes nothing: XREAD BLOCK after the tail id. Its reply
  // means only "read again"; redis::SubscriptionOps::ParseRead parses it if needed.
  redis::Command WaitForNew(std::string_view tail_id, Millis block) const;
  // ParseAck: how many were acknowledged.
  redis::Command Ack(int64_t token, std::span<const std::string> ids, redis::AckMode mode) const;
  // Claims the ids again to this consumer (one more delivery each). ParseEntries.
  redis::Command Retry(int64_t token, std::span<const std::string> ids) const;
  // Refreshes their idle time without counting a delivery. ParseIds.
  redis::Command KeepAlive(int64_t token, std::span<const std::string> ids) const;
  // XADD the record to the shard's dead-letter stream, then acknowledge the entry, one step, and
  // only while the entry is pending (a repeat after a lost reply writes nothing). ParseDone: true
  // written, false no longer pending.
  redis::Command DeadLetter(int64_t token, const StreamEntry& entry,
                            const redis::DeadLetterMeta& meta, redis::AckMode mode,
                            int64_t max_len) const;

  static StatusOr<Fenced<int64_t>> ParseInstall(const redis::ReplyView& reply);
  static StatusOr<Fenced<redis::AutoClaimReply>> ParseClaimAll(const redis::ReplyView& reply);
  static StatusOr<Fenced<FencedRead>> ParseRead(const redis::ReplyView& reply);
  static StatusOr<Fenced<int64_t>> ParseAck(const redis::ReplyView& reply);
  static StatusOr<Fenced<std::vector<StreamEntry>>> ParseEntries(const redis::ReplyView& reply);
  static StatusOr<Fenced<std::vector<std::string>>> ParseIds(const redis::ReplyView& reply);
  static StatusOr<Fenced<bool>> ParseDone(const redis::ReplyView& reply);

 private:
  redis::Command Call(std::string_view op, int64_t token) const;

  std::string shard_key_;
  std::string fence_key_;
  std::string dead_letter_key_;
  std::string group_;
  std::string consumer_;
};

}  // namespace streamcar::sharding
