#pragma once
// The one codec of a dead letter (SPEC 3.3): the fields the runtime writes, the parse
// `streamcar dlq list` reads them back with, and the replay step of `streamcar dlq replay`.
//
// A record is the original fields in entry order, then the metadata in this order:
//   streamcar.stream streamcar.id streamcar.group streamcar.attempts streamcar.reason
//   streamcar.status streamcar.error streamcar.time
// Original fields may carry any name, "streamcar.reason" included: the metadata is the trailing
// run of metadata names, each at most once, read from the end, so an original field never
// shadows it and is never taken for it.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sidecar/common/status.h"
#include "sidecar/common/stream_entry.h"
#include "sidecar/redis/reply.h"

namespace streamcar::redis {

// Why and how an entry failed, as the dead letter records it.
struct DeadLetterMeta {
  std::string reason;  // max_attempts | rejected | dropped | invalid
  std::string status;  // HTTP status or "timeout" / "error"
  std::string error;   // first 1 KiB of the body or the error (cut when written)
  int attempts = 0;
  int64_t time_ms = 0;
};

// Where dead letters of a subscription go.
struct DeadLetterTarget {
  std::string stream;
  int64_t max_len = 0;  // 0: no MAXLEN
};

// The metadata field names in the order they are written.
inline constexpr std::array<std::string_view, 8> kDeadLetterMetaFields = {
    "streamcar.stream", "streamcar.id",     "streamcar.group", "streamcar.attempts",
    "streamcar.reason", "streamcar.status", "streamcar.error", "streamcar.time"};
// streamcar.error keeps at most this many bytes.
inline constexpr size_t kDeadLetterErrorBytes = 1024;

// Appends the record's fields (field, value, field, value, ...) for `entry` of `stream`/`group`.
void AppendDeadLetterFields(std::string_view stream, std::string_view group,
                            const StreamEntry& entry, const DeadLetterMeta& meta, Command* command);

// The dead letter's XADD on its own, for the two-step path (SPEC 8: the dead-letter stream in
// another slot than the stream): `XADD <dlq> [MAXLEN ~ <max_len>] * <the record's fields>`, the
// command the one-step script runs (settle_scripts.cc). The reply is the new id.
Command DeadLetterAdd(const DeadLetterTarget& dlq, std::string_view stream, std::string_view group,
                      const StreamEntry& entry, const DeadLetterMeta& meta);

// A dead letter's metadata decoded by the names AppendDeadLetterFields writes it with (the one
// reader of those names, for `streamcar dlq`). A field the record lacks reads as "" (a number:
// 0); a value is kept byte for byte, binary included.
struct DecodedDeadLetter {
  std::string stream;       // the stream the entry was read from
  std::string original_id;  // the entry's id there
  std::string group;        // the group that read it
  std::string attempts;     // as written: a decimal number
  std::string reason;
  std::string status;
  std::string error;
  int64_t attempt_count = 0;  // `attempts` as a number; 0 when absent or not a number
  int64_t time_ms = 0;        // when it was dead-lettered; 0 when absent or not a number
};

// A dead letter read back from the dead-letter stream.
class DeadLetterRecord {
 public:
  explicit DeadLetterRecord(StreamEntry entry);

  // The dead letter's own id in the dead-letter stream.
  const std::string& id() const { return entry_.id; }
  const StreamEntry& entry() const { return entry_; }
  // The metadata value of `key` ("streamcar.reason"), or "" when the record has none.
  std::string_view Meta(std::string_view key) const;
  // Numeric metadata; 0 when absent or not a number.
  int64_t MetaInteger(std::string_view key) const;
  // The original fields, without the trailing metadata.
  std::vector<std::pair<std::string, std::string>> Original() const;
  // The metadata, decoded.
  DecodedDeadLetter Decode() const;
  // Whether it records an entry of `stream` read by `group` (a dead-letter stream may be shared).
  bool BelongsTo(std::string_view stream, std::string_view group) const;

 private:
  StreamEntry entry_;
  size_t meta_begin_ = 0;  // fields [meta_begin_, end) are the metadata
};

// One replay of `record` onto `source_stream`, as one step in Redis: XADD the original fields,
// then XDEL the dead letter, only if it still exists and only if the XADD succeeded.
Command Replay(std::string_view source_stream, std::string_view dead_letter_stream,
               const DeadLetterRecord& record);
// The replay's reply: the new entry's id, nullopt when the dead letter was gone (replayed or
// deleted meanwhile), or the error that stopped the script before its XDEL.
StatusOr<std::optional<std::string>> ParseReplay(const ReplyView& reply);

}  // namespace streamcar::redis
