#pragma once
// The Redis operations of one subscription (stream, group, consumer), as named operations rather
// than raw commands spread through the engine: a fenced (sharded) implementation can later replace
// these per subscription (DESIGN.md). Each method runs on the caller's Session and thread.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/redis/dead_letter_record.h"
#include "sidecar/redis/entry.h"
#include "sidecar/redis/script.h"
#include "sidecar/redis/session.h"

namespace streamcar::redis {

struct AutoClaimResult {
  std::string next_cursor;               // "0-0" when the scan is complete
  std::vector<StreamEntry> entries;      // claimed, with their new attempt counts
  std::vector<std::string> deleted_ids;  // in the PEL but gone from the stream
};

// How acknowledged entries leave the stream (SPEC 4.3).
enum class AckMode { kAckOnly, kAckDel, kAckThenDelete };

// What an owner-checked retry claim found (SPEC 3.2).
struct RetryClaimReply {
  std::vector<StreamEntry> entries;   // claimed again (one more delivery); deleted ones flagged
  std::vector<std::string> lost_ids;  // no longer this consumer's: a lost lease
};

struct GroupInfo {
  int64_t pending = 0;
  std::optional<int64_t> lag;  // nil when Redis cannot tell (see XINFO GROUPS)
  std::string last_delivered_id;
};

class StreamOps {
 public:
  StreamOps(std::string stream, std::string group, std::string consumer)
      : stream_(std::move(stream)), group_(std::move(group)), consumer_(std::move(consumer)) {}

  const std::string& stream() const { return stream_; }
  const std::string& group() const { return group_; }
  const std::string& consumer() const { return consumer_; }

  // XGROUP CREATE ... MKSTREAM. An existing group (BUSYGROUP) is success and keeps its position;
  // WRONGTYPE is kFatal naming the key. Never destroys anything.
  Status EnsureGroup(Session& session, const std::string& start_id) const;

  // This consumer's own pending entries after `cursor` (history read), with attempt counts.
  StatusOr<std::vector<StreamEntry>> ReadOwnPending(Session& session, const std::string& cursor,
                                                    int count) const;
  // New entries ('>'), waiting up to `block` for some. Attempts are 1.
  StatusOr<std::vector<StreamEntry>> ReadNew(Session& session, int count, Millis block) const;
  // Entries of any consumer idle longer than `min_idle`, claimed to this consumer.
  StatusOr<AutoClaimResult> AutoClaim(Session& session, Millis min_idle, const std::string& cursor,
                                      int count) const;

  // Command builders for the settler's pipelines.
  Command Ack(const std::vector<std::string>& ids) const;
  Command Delete(const std::vector<std::string>& ids) const;
  Command AckDelete(const std::vector<std::string>& ids) const;  // XACKDEL ... ACKED

  // The scripts below check in the same step that this consumer still owns each entry: a claim
  // never takes an entry back from a peer that reclaimed it (SPEC 3.2). Each connection that
  // sends them loads Scripts() first.
  static const std::vector<const Script*>& Scripts();
  // Claims the ids this consumer still owns again (one more delivery, the entries returned);
  // the others are reported lost. Reply: ParseRetryClaim.
  Command ClaimForRetry(const std::vector<std::string>& ids) const;
  static RetryClaimReply ParseRetryClaim(const ReplyView& reply);
  // The lease keepalive: refreshes the idle time of the ids this consumer still owns without
  // counting a delivery. Reply: the ids it no longer owns (ParseIds).
  Command KeepAlive(const std::vector<std::string>& ids) const;
  static std::vector<std::string> ParseIds(const ReplyView& reply);
  // The dead letter (SPEC 3.3) as one step: XADD the original fields plus streamcar.* metadata
  // to `dlq_stream`, and only if that succeeded, acknowledge the entry (XACKDEL, or XACK and
  // XDEL, by `ack_mode`). Reply: 1 written, 0 not written because the entry is no longer
  // pending for this consumer (lost lease), or the error of the command that failed.
  Command DeadLetter(const std::string& dlq_stream, int64_t dlq_max_len, const StreamEntry& entry,
                     const DeadLetterMeta& meta, AckMode ack_mode) const;
  // Reading is not delivering (SPEC 3.2): for entries read but never POSTed, puts back the
  // delivery count they had before the read, keeping their idle time. Reply: how many.
  Command UndoReads(const std::vector<std::string>& ids) const;

  // Reads an XCLAIM (or XRANGE-like) reply: [[id, [f, v, ...]] | nil, ...].
  static std::vector<StreamEntry> ParseEntries(const ReplyView& list);

  // This consumer's pending entries from `start` on (inclusive; "(<id>" exclusive), with their
  // delivery counts, up to `count`: XPENDING, which counts no delivery.
  StatusOr<std::vector<std::pair<std::string, int>>> OwnPendingIds(Session& session,
                                                                   const std::string& start,
                                                                   int count) const;
  // The entries with these ids, without counting a delivery (XRANGE id id, pipelined). An id
  // whose payload is gone comes back with `deleted` set.
  StatusOr<std::vector<StreamEntry>> Fetch(Session& session,
                                           const std::vector<std::string>& ids) const;

  // Delivery counts of this consumer's pending entries in [first, last].
  StatusOr<std::map<std::string, int>> DeliveryCounts(Session& session, const std::string& first,
                                                      const std::string& last, int count) const;
  // PEL size and lag of the group (XPENDING summary + XINFO GROUPS).
  StatusOr<GroupInfo> Info(Session& session) const;
  // When Redis reports no lag: the entries after `last_delivered_id`, counted up to `cap`.
  StatusOr<int64_t> CountAfter(Session& session, const std::string& last_delivered_id,
                               int64_t cap) const;
  // Whether the server has XACKDEL (COMMAND INFO, never the version string: DESIGN.md trap 6).
  static StatusOr<bool> HasAckDel(Session& session);
  // The number of consumer groups on the stream.
  StatusOr<int64_t> GroupCount(Session& session) const;

 private:
  Status FillAttempts(Session& session, std::vector<StreamEntry>* entries) const;

  std::string stream_;
  std::string group_;
  std::string consumer_;
};

}  // namespace streamcar::redis
