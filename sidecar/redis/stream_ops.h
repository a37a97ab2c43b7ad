#pragma once
// The Redis operations of one subscription (stream, group, consumer), as named operations rather
// than raw commands spread through the engine: a fenced (sharded) implementation can later replace
// these per subscription (DESIGN.md). Each method runs on the caller's Session and thread.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/redis/entry.h"
#include "sidecar/redis/session.h"

namespace streamcar::redis {

struct AutoClaimResult {
  std::string next_cursor;               // "0-0" when the scan is complete
  std::vector<StreamEntry> entries;      // claimed, with their new attempt counts
  std::vector<std::string> deleted_ids;  // in the PEL but gone from the stream
};

struct DeadLetterMeta {
  std::string reason;  // max_attempts | rejected | dropped | invalid
  std::string status;  // HTTP status or "timeout" / "error"
  std::string error;   // first 1 KiB of the body or the error
  int attempts = 0;
  int64_t time_ms = 0;
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
  // XCLAIM to ourselves with min-idle 0: counts one more delivery and returns the entries.
  Command ClaimForRetry(const std::vector<std::string>& ids) const;
  // XCLAIM ... JUSTID: resets idle time, does not count a delivery (the lease keepalive).
  Command KeepAlive(const std::vector<std::string>& ids) const;
  // XADD to the dead-letter stream: the original fields plus streamcar.* metadata.
  Command DeadLetterAdd(const std::string& dlq_stream, int64_t dlq_max_len,
                        const StreamEntry& entry, const DeadLetterMeta& meta) const;

  // Reads an XCLAIM (or XRANGE-like) reply: [[id, [f, v, ...]] | nil, ...].
  static std::vector<StreamEntry> ParseEntries(const ReplyView& list);

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
