#pragma once
// Window reads over a stream's whole life (SPEC section 10): entries at or below the archive
// watermark W come from the archive, the rest from Redis, merged with no gap and no duplicate
// even while a fold and a trim run concurrently. Used by the API's GET, its SSE catch-up, and
// the `read` and `tail` commands.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/common/status.h"
#include "sidecar/common/stream_entry.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/redis/session.h"

namespace streamcar::log {

class ArchiveStore;

// A bound of a window as the user writes it: an RFC 3339 instant ("2026-11-30T14:30:00Z",
// "...+01:00", fractional seconds allowed), milliseconds since the epoch ("1764513000000"), or an
// entry id ("1764513000000-3"). Returns the entry id the bound stands for: an instant or a
// millisecond count T becomes "T-0" (so [since, until) by time is [T1-0, T2-0) by id).
// kInvalid saying what is wrong otherwise.
StatusOr<std::string> ParseBound(std::string_view text);

// A page holds at most this many bytes of field names and values (SPEC is silent; docs/api.md):
// a page that would hold more ends early with `next` set, so a reader of large entries pages on
// instead of making the sidecar hold count × entry size. An entry larger than this alone is still
// returned, alone.
inline constexpr size_t kPageByteBudget = size_t{16} << 20;

// The errors of the archive come out of a LogReader with this prefix, so that a caller tells an
// archive outage from a Redis one.
inline constexpr std::string_view kArchiveErrorPrefix = "archive: ";

struct WindowQuery {
  std::string since = "0-0";  // inclusive entry id
  std::string until;          // exclusive entry id; "" = no upper bound
  std::string after;          // exclusive entry id continuing a page; "" = none
  int count = 100;            // 1..10000
};

struct LogPage {
  std::vector<StreamEntry> entries;  // ascending ids, attempts unused
  // The id to pass as `after` for the next page, or nullopt when the window holds nothing more
  // right now (a window open at the top may grow later).
  std::optional<std::string> next;
};

class LogReader {
 public:
  // `archive` may be null: the stream is read from Redis only. Both are borrowed and used on the
  // caller's thread only.
  // `page_byte_budget`: kPageByteBudget but in tests.
  LogReader(redis::Session* session, ArchiveStore* archive,
            size_t page_byte_budget = kPageByteBudget);

  // One page of `stream` in the window. kServerError WRONGTYPE etc. as Redis says; kIo or
  // kTimeout when Redis or the archive is unreachable.
  StatusOr<LogPage> Read(const std::string& stream, const WindowQuery& query);

 private:
  // Step 1 of Read: the archive's watermark W (0-0 without an archive).
  StatusOr<EntryId> ArchiveWatermark(const std::string& stream);
  StatusOr<std::vector<StreamEntry>> ReadRedis(const std::string& stream, EntryId from,
                                               std::optional<EntryId> until, int want,
                                               std::optional<EntryId>* cut);
  StatusOr<std::vector<StreamEntry>> ReadArchive(const std::string& stream, EntryId start,
                                                 std::optional<EntryId> until, int want,
                                                 EntryId* w2, std::optional<EntryId>* cut);

  redis::Session* session_;
  ArchiveStore* archive_;
  size_t budget_;
};

}  // namespace streamcar::log
