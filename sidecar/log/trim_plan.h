#pragma once
// Where a manual trim (`streamcar trim`, SPEC 1 and 10) cuts a stream, read from Redis without
// writing anything: the id a selector stands for, and the entries it makes due now. Every command
// names the stream, so in a cluster each goes to the stream's own node (Redis TIME included).

#include <cstdint>
#include <optional>
#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/common/text.h"
#include "sidecar/redis/session.h"

namespace streamcar::log {

// One of the three selectors of `streamcar trim`.
struct TrimPoint {
  enum class Kind { kMaxLen, kMaxAge, kMinId };
  Kind kind = Kind::kMaxLen;
  int64_t max_len = 0;  // kMaxLen: keep the newest max_len entries (0: keep none)
  Millis max_age{0};    // kMaxAge: keep the entries younger than this, by Redis's clock
  EntryId min_id;       // kMinId: keep the entries at or above this id
};

// The id below which a kMaxAge or kMinId point trims: min_id itself, or "<now - max_age>-0" with
// now from TIME on the stream's node (0-0, trimming nothing, when that is before the epoch).
StatusOr<EntryId> MinIdOf(redis::Session& session, const std::string& stream,
                          const TrimPoint& point);

// The entries a point makes due: always a prefix of the stream.
struct DueSpan {
  int64_t length = 0;           // XLEN when it was read
  std::optional<EntryId> last;  // the newest due entry; none when nothing is due
  int64_t count = 0;            // how many are due (-1: not counted)
};

// The due entries of `point` now. For kMaxLen the count is XLEN - max_len and `last` is found
// from whichever end of the stream is nearer; for kMaxAge and kMinId `last` is one XREVRANGE, and
// the count (only when `count` is asked for) pages through every due entry's id.
StatusOr<DueSpan> DueSpanOf(redis::Session& session, const std::string& stream,
                            const TrimPoint& point, bool count);

}  // namespace streamcar::log
