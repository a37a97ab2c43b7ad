#pragma once
// The shared read's buffer of one followed stream (follow_hub.cc): every entry of the stream with
// floor < id <= last, bounded in entries and bytes by dropping the oldest (which moves the floor
// up). A follower at position p with floor <= p takes the entries above p from it, with no gap
// and no duplicate.

#include <cstddef>
#include <deque>
#include <vector>

#include "sidecar/common/status.h"
#include "sidecar/common/stream_entry.h"
#include "sidecar/log/entry_id.h"

namespace streamcar::log {

// Entries handed to a follower per Next(), read per stream per shared XREAD, and per catch-up
// page: small enough that a batch of large entries (say 1 MiB each) stays ~100 MiB at most.
inline constexpr int kFollowBatch = 100;

struct Feed {
  struct Buffered {
    EntryId id;
    StreamEntry entry;
    size_t bytes = 0;
  };

  EntryId floor;  // the buffer holds every entry with floor < id <= last
  EntryId last;
  std::deque<Buffered> buffer;
  size_t bytes = 0;  // the sum of the buffered entries' bytes
  Status error;      // set when the key cannot be read as a stream (WRONGTYPE); not retried

  // Adds an entry the shared read returned; one at or below `last` (read twice) is skipped.
  void Append(StreamEntry entry);
  // Drops the oldest entries while the buffer holds more than either bound.
  void Trim(size_t max_entries, size_t max_bytes);
  // The shared read may have skipped entries at or below `to` (follow_gap.h): drops the buffered
  // entries up to it and moves the floor there (never down, never above `last`), so that a
  // follower below it catches up through the LogReader. Always safe: a higher floor only sends
  // more followers to the log.
  void RaiseFloor(const EntryId& to);
  // Moves up to kFollowBatch entries above *position into *out (copies: other followers take
  // them too), stopping once they hold `max_bytes` (at least one entry), and *position to the
  // last one taken.
  void TakeAfter(EntryId* position, std::vector<StreamEntry>* out, size_t max_bytes) const;
};

// An entry's bytes as the follow buffers count them: its id, field names and values.
size_t EntryBytes(const StreamEntry& entry);

}  // namespace streamcar::log
