#pragma once
// The Redis operations of one subscription (stream, group, consumer) as pure pairs: a builder
// that returns the command(s) and a static parser of the reply(ies). Nothing here does I/O, so a
// runtime may pipeline them on any connection; sync_ops.h runs them on a blocking Session.
// SubscriptionOps is the seam DESIGN.md asks for: PlainOps now, a fenced (sharded) implementation
// later. This file is *the* wire form of every stream operation; the Lua bodies of the
// owner-checked steps are in settle_scripts.cc, the dead-letter record in dead_letter_record.cc.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/common/stream_entry.h"
#include "sidecar/redis/dead_letter_record.h"
#include "sidecar/redis/group_info.h"
#include "sidecar/redis/reply.h"
#include "sidecar/redis/script.h"
#include "sidecar/redis/session.h"

namespace streamcar::redis {

// One step of several commands (possibly MULTI ... EXEC), parsed from its own replies.
struct CommandGroup {
  std::vector<Command> commands;
};

// How acknowledged entries leave the stream (SPEC 4.3).
enum class AckMode { kAckOnly, kAckDel, kAckThenDelete };
// The mode as the scripts take it: ack | ackdel | ackxdel.
std::string_view AckModeArg(AckMode mode);

// What XAUTOCLAIM found.
struct AutoClaimReply {
  std::string next_cursor;               // "0-0" when the scan is complete
  std::vector<StreamEntry> entries;      // claimed; attempts filled by DeliveryCounts
  std::vector<std::string> deleted_ids;  // in the PEL but gone from the stream
};
using AutoClaimResult = AutoClaimReply;

// What an owner-checked retry claim found (SPEC 3.2).
struct RetryClaimReply {
  // Claimed again (one more delivery); deleted ones flagged; attempts: the pending list's count
  // after the claim (0 when the reply did not say).
  std::vector<StreamEntry> entries;
  std::vector<std::string> lost_ids;  // no longer this consumer's: a lost lease
};

// What the dead-letter step did (SPEC 3.3); an error reply is a Status instead.
enum class DeadLetterResult { kWritten, kNotOurs };

// This consumer's pending ids with their delivery counts (XPENDING's extended form).
using PendingIds = std::vector<std::pair<std::string, int>>;

class SubscriptionOps {
 public:
  virtual ~SubscriptionOps() = default;

  virtual const std::string& stream() const = 0;
  virtual const std::string& group() const = 0;
  virtual const std::string& consumer() const = 0;
  // The scripts these steps send: a connection loads them after connecting, and again after a
  // NOSCRIPT (a restarted or failed-over server forgot them).
  virtual std::span<const Script* const> Scripts() const = 0;
  // Whether every step, reads and acks included, is one of those scripts (a shard's fenced
  // steps) rather than plain XREADGROUP and XACK: then the read connection loads them too, and a
  // NOSCRIPT can answer a batch of acks alone.
  virtual bool EveryStepIsAScript() const = 0;
  // When `status` (what a parser of these steps returned) is a refusal because another holds the
  // stream now (a shard's fence: FENCED or STALE), what the refusal names (the token installed
  // instead); else nullopt. Whoever sees one stops: every step after it would be refused too.
  // Plain steps are never refused so.
  virtual std::optional<int64_t> RefusedOwnership(const Status& /*status*/) const {
    return std::nullopt;
  }

  // XGROUP CREATE ... MKSTREAM. ParseEnsureGroup: an existing group (BUSYGROUP) is success and
  // keeps its position; WRONGTYPE is kFatal naming the key. Never destroys anything.
  virtual Command EnsureGroup(std::string_view start_id) const = 0;
  virtual Status ParseEnsureGroup(const ReplyView& reply) const = 0;
  // New entries ('>'), waiting up to `block` for some. Attempts are 1. ParseRead.
  virtual Command ReadNew(int count, Millis block) const = 0;
  // This consumer's own pending entries after `cursor` (a history read, which counts one
  // delivery). ParseRead, then DeliveryCounts for the attempts.
  virtual Command ReadOwnPending(std::string_view cursor, int count) const = 0;
  // Entries of any consumer idle longer than `min_idle`, claimed to this consumer.
  // ParseAutoClaim, then DeliveryCounts.
  virtual Command AutoClaim(Millis min_idle, std::string_view cursor, int count) const = 0;
  // One exact lookup per entry (XPENDING s g id id 1 consumer): counts are never missed however
  // many of our own ids lie between the entries. ApplyDeliveryCounts.
  virtual std::vector<Command> DeliveryCounts(std::span<const StreamEntry> entries) const = 0;
  // This consumer's pending ids from `start` on (inclusive; "(<id>" exclusive), up to `count`,
  // with their delivery counts: XPENDING, which counts no delivery. ParsePendingIds.
  virtual Command OwnPendingIds(std::string_view start, int count) const = 0;
  // The entries with these ids without counting a delivery (XRANGE id id each). ParseFetch.
  virtual std::vector<Command> Fetch(std::span<const std::string> ids) const = 0;
  // XACK | XACKDEL ... ACKED | MULTI XACK XDEL EXEC. ParseAck.
  virtual CommandGroup Ack(std::span<const std::string> ids, AckMode mode) const = 0;

  // The scripts below check in the same step that this consumer still owns each entry: a claim
  // never takes an entry back from a peer that reclaimed it (SPEC 3.2). Each connection that
  // sends them loads Scripts() first; NOSCRIPT means "load again, then retry".
  //
  // Claims the ids this consumer still owns again (one more delivery, the entries returned);
  // the others are reported lost. ParseRetryClaim.
  virtual Command RetryClaim(std::span<const std::string> ids) const = 0;
  // The lease keepalive: refreshes the idle time of the ids still ours without counting a
  // delivery. ParseIds: the ids no longer ours.
  virtual Command KeepAlive(std::span<const std::string> ids) const = 0;
  // The dead letter (SPEC 3.3) as one step: XADD the record to `dlq`, and only if that
  // succeeded, acknowledge the entry as `mode` says. ParseDeadLetter.
  virtual Command DeadLetter(const DeadLetterTarget& dlq, const StreamEntry& entry,
                             const DeadLetterMeta& meta, AckMode mode) const = 0;
  // The last step of the two-step dead letter (SPEC 8: the dead-letter stream in another slot,
  // its record already XADDed there): acknowledges `id` as `mode` says only if it is still
  // pending for this consumer. ParseOwnedAck.
  virtual Command OwnedAck(std::string_view id, AckMode mode) const = 0;
  // Reading is not delivering (SPEC 3.2): for entries read but never POSTed, puts back the
  // delivery count they had before the read, keeping their idle time. ParseCount.
  virtual Command UndoReads(std::span<const std::string> ids) const = 0;

  // XREADGROUP: nil is no entries; [id, nil] (deleted while pending) comes back flagged deleted.
  static StatusOr<std::vector<StreamEntry>> ParseRead(const ReplyView& reply);
  // XAUTOCLAIM, in the Redis 6.2 shape [cursor, entries] (a deleted entry inline as nil or
  // [id, nil]) and the Redis 7 shape [cursor, entries, deleted ids].
  static StatusOr<AutoClaimReply> ParseAutoClaim(const ReplyView& reply);
  // Sets each entry's attempts from the replies of DeliveryCounts(entries), in order. An entry
  // no longer in our PEL (acknowledged or claimed meanwhile) keeps the lower bound 1.
  static Status ApplyDeliveryCounts(std::span<const Reply> replies,
                                    std::vector<StreamEntry>* entries);
  static StatusOr<PendingIds> ParsePendingIds(const ReplyView& reply);
  // The replies of Fetch(ids): an id whose payload is gone comes back flagged deleted.
  static StatusOr<std::vector<StreamEntry>> ParseFetch(std::span<const Reply> replies,
                                                       std::span<const std::string> ids);
  // The replies of one Ack group: any error, inside EXEC too, is that error.
  static Status ParseAck(std::span<const Reply> replies);
  static StatusOr<RetryClaimReply> ParseRetryClaim(const ReplyView& reply);
  static StatusOr<std::vector<std::string>> ParseIds(const ReplyView& reply);
  static StatusOr<DeadLetterResult> ParseDeadLetter(const ReplyView& reply);
  static StatusOr<int64_t> ParseCount(const ReplyView& reply);
  // OwnedAck: true acknowledged now, false not ours (nothing done).
  static StatusOr<bool> ParseOwnedAck(const ReplyView& reply);
  // One reply of DeliveryCounts: whether `id` is still pending for this consumer.
  static StatusOr<bool> ParseStillOurs(const ReplyView& reply, std::string_view id);
  // Entries of an XCLAIM / XRANGE-like list: [[id, [f, v, ...]] | [id, nil] | nil, ...]. A nil
  // element (Redis 6.2 XCLAIM of a deleted id) is skipped. Never fails: any shape is read.
  static std::vector<StreamEntry> ParseEntries(const ReplyView& list);
};

// The operations of a plain (unsharded) subscription.
class PlainOps final : public SubscriptionOps {
 public:
  PlainOps(std::string stream, std::string group, std::string consumer)
      : stream_(std::move(stream)), group_(std::move(group)), consumer_(std::move(consumer)) {}

  const std::string& stream() const override { return stream_; }
  const std::string& group() const override { return group_; }
  const std::string& consumer() const override { return consumer_; }
  std::span<const Script* const> Scripts() const override;  // SettleScripts()
  bool EveryStepIsAScript() const override { return false; }

  Command EnsureGroup(std::string_view start_id) const override;
  Status ParseEnsureGroup(const ReplyView& reply) const override;
  Command ReadNew(int count, Millis block) const override;
  Command ReadOwnPending(std::string_view cursor, int count) const override;
  Command AutoClaim(Millis min_idle, std::string_view cursor, int count) const override;
  std::vector<Command> DeliveryCounts(std::span<const StreamEntry> entries) const override;
  Command OwnPendingIds(std::string_view start, int count) const override;
  std::vector<Command> Fetch(std::span<const std::string> ids) const override;
  CommandGroup Ack(std::span<const std::string> ids, AckMode mode) const override;
  Command RetryClaim(std::span<const std::string> ids) const override;
  Command KeepAlive(std::span<const std::string> ids) const override;
  Command DeadLetter(const DeadLetterTarget& dlq, const StreamEntry& entry,
                     const DeadLetterMeta& meta, AckMode mode) const override;
  Command OwnedAck(std::string_view id, AckMode mode) const override;
  Command UndoReads(std::span<const std::string> ids) const override;

 private:
  Command WithIds(const Script& script, std::span<const std::string> ids) const;

  std::string stream_;
  std::string group_;
  std::string consumer_;
};

std::unique_ptr<SubscriptionOps> MakePlainOps(std::string stream, std::string group,
                                              std::string consumer);

}  // namespace streamcar::redis
