#pragma once
// The operations of one shard of a sharded subscription (SHARDING.md B5) behind the runtime's
// seam, redis::SubscriptionOps: the same builders and the same reply shapes as a plain
// subscription's, but every step that changes the shard runs behind the fence check of
// fenced_script.h with the token of this member's grant. A refusal is an error reply, "FENCED
// <token>" or "STALE <token>", which FencedBy() reads back from the Status any parser returns.
//
// What differs from the plain operations:
//   - EnsureGroup installs the fence token first (B5 takeover step 2), then creates the group;
//   - the runtime reads new entries with an optimistic transaction, not a script (WatchFence,
//     then ReadWatched): the same check in the same step, without the Lua conversion of every
//     entry read, which made the script read cost Redis about twice a plain XREADGROUP
//     (docs/benchmarks.md). ReadNew is the same read as one script, for callers that cannot hold
//     a connection across two round trips;
//   - neither blocks (Redis refuses BLOCK in scripts, and ignores it in transactions): when '>'
//     finds nothing, the reply is the shard's last id, where WaitForNew starts;
//   - ReadOwnPending is the takeover (B5 step 3): the own-PEL drain a subscription runs at start
//     pages through every pending entry of the shard, whoever read it, claiming each to this
//     consumer with one more delivery, in id order, before anything new is read;
//   - AutoClaim likewise claims every pending entry whatever its idle time;
//   - the dead-letter stream is the shard's own (same slot): DLQ write and ack are one step.
// The read-only steps (XPENDING, XRANGE) are the plain ones: they change nothing.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::sharding {

// What the fenced '>' read brought: entries, or none and the shard's last id.
struct FencedRead {
  std::vector<StreamEntry> entries;
  std::string tail_id;  // set when entries is empty: the last id in the shard, or "0-0"
};

class FencedShardOps final : public redis::SubscriptionOps {
 public:
  FencedShardOps(const std::string& shard_key, const std::string& group, std::string consumer,
                 int64_t token, std::string member_id, int64_t member_epoch);

  const std::string& stream() const override { return plain_.stream(); }
  const std::string& group() const override { return plain_.group(); }
  const std::string& consumer() const override { return plain_.consumer(); }
  std::span<const redis::Script* const> Scripts() const override;  // FencedScripts()
  bool EveryStepIsAScript() const override { return true; }
  // FencedBy: the fence's FENCED and STALE refusals.
  std::optional<int64_t> RefusedOwnership(const Status& status) const override {
    return FencedBy(status);
  }
  int64_t token() const { return token_; }
  const std::string& fence_key() const { return fence_key_; }
  const std::string& dead_letter_key() const { return dead_letter_key_; }

  redis::Command EnsureGroup(std::string_view start_id) const override;
  // STALE stays a kServerError (FencedBy reads it); WRONGTYPE is kFatal naming the key.
  Status ParseEnsureGroup(const redis::ReplyView& reply) const override;
  // `block` is ignored: see above. ParseFencedRead.
  redis::Command ReadNew(int count, Millis block) const override;
  redis::Command ReadOwnPending(std::string_view cursor, int count) const override;
  // `min_idle` is ignored: a takeover claims everything (B5).
  redis::Command AutoClaim(Millis min_idle, std::string_view cursor, int count) const override;
  std::vector<redis::Command> DeliveryCounts(std::span<const StreamEntry> entries) const override;
  redis::Command OwnPendingIds(std::string_view start, int count) const override;
  std::vector<redis::Command> Fetch(std::span<const std::string> ids) const override;
  redis::CommandGroup Ack(std::span<const std::string> ids, redis::AckMode mode) const override;
  redis::Command RetryClaim(std::span<const std::string> ids) const override;
  redis::Command KeepAlive(std::span<const std::string> ids) const override;
  redis::Command DeadLetter(const redis::DeadLetterTarget& dlq, const StreamEntry& entry,
                            const redis::DeadLetterMeta& meta, redis::AckMode mode) const override;
  redis::Command OwnedAck(std::string_view id, redis::AckMode mode) const override;
  redis::Command UndoReads(std::span<const std::string> ids) const override;

  // The fenced read as an optimistic transaction, in two round trips on one connection:
  //   1. WatchFence: UNWATCH (whatever an earlier check left), WATCH the fence key, HGET its
  //      token, MULTI. CheckFence: ok when this token is installed and the transaction is open;
  //      else a FENCED refusal as the scripts give it (or the error a command met), and when
  //      a transaction is open all the same (`in_transaction`), CloseTransaction() goes first.
  //   2. ReadWatched: XREADGROUP '>', XREVRANGE + - COUNT 1, EXEC. EXEC runs nothing when the
  //      fence key was written after the WATCH (another member's install), so the read happens
  //      only while this token is installed, as the script's check makes sure; its reply does
  //      not pass through Lua. ParseWatchedRead.
  // The WATCH and the open transaction belong to the connection: step 2 is sent only from step
  // 1's answer, on the connection that gave it (a new connection would run the read unchecked).
  // Not while the connection follows an -ASK: its ASKING before each command would be queued
  // inside the transaction.
  std::vector<redis::Command> WatchFence() const;
  struct FenceCheck {
    Status status;
    bool in_transaction = false;  // open: CloseTransaction() unless step 2 follows
  };
  FenceCheck CheckFence(std::span<const redis::Reply> replies) const;
  std::vector<redis::Command> ReadWatched(int count) const;
  static redis::Command CloseTransaction();
  // The entries or the tail id; nullopt when EXEC ran nothing (the fence was written since the
  // WATCH: check again). A refusal of a queued command (NOPERM, MOVED) is that refusal, not
  // EXECABORT.
  static StatusOr<std::optional<FencedRead>> ParseWatchedRead(
      std::span<const redis::Reply> replies);

  // The wait for new entries, which changes nothing (B5): XREAD BLOCK after `tail_id`. Any reply
  // but nil means "read again".
  redis::Command WaitForNew(std::string_view tail_id, Millis block) const;

  // The reply of ReadNew: entries, or the tail id.
  static StatusOr<FencedRead> ParseFencedRead(const redis::ReplyView& reply);
  // The token installed instead, when `status` is a FENCED or STALE refusal; else nullopt.
  static std::optional<int64_t> FencedBy(const Status& status);

 private:
  // EVALSHA of `script` on the shard (and `extra_key`, if any) and its fence, token first.
  redis::Command Call(const redis::Script& script, std::string_view extra_key = {}) const;
  redis::Command WithIds(const redis::Script& script, std::span<const std::string> ids) const;

  redis::PlainOps plain_;  // the read-only steps, and the names
  std::string fence_key_;
  std::string dead_letter_key_;
  int64_t token_;
  std::string member_id_;
  int64_t member_epoch_;
};

}  // namespace streamcar::sharding
