#pragma once
// Whether the follow hub's shared read skipped entries (follow_hub.cc). The shared read resumes
// with `XREAD ... <last>`; an entry above `last` that a trim (the archive's fold, retention) or an
// XDEL removed before that read ran is silently not returned. Followers taking from the read's
// buffer would then miss it. The lane asks the stream what it removed (XINFO STREAM) right after
// a read and, when something above `last` may be gone, raises the buffer's floor past it, so that
// every follower below the floor catches up through the LogReader (archive, then Redis) instead.

#include <optional>

#include "sidecar/log/entry_id.h"
#include "sidecar/redis/reply.h"

namespace streamcar::log {

// What XINFO STREAM says the stream removed, read after the shared read.
struct StreamRemovals {
  bool exists = false;
  // The stream's first entry now (nullopt: empty). A trim removes a prefix, so when it is at or
  // below the read point no trim reached above it.
  std::optional<EntryId> first_entry;
  // The highest id XDEL ever removed (Redis 7.0 and later; trims do not count here).
  std::optional<EntryId> max_deleted;
};

// Parses an XINFO STREAM reply; a reply that says nothing usable leaves the fields unset (and
// SkippedUpTo then assumes the worst).
StreamRemovals ParseStreamRemovals(const redis::ReplyView& info);

// Whether the shared read of a stream from just after `read_from`, which returned entries from
// `first_read` to `last_read`, may have skipped entries between `read_from` and `first_read`.
// nullopt when nothing can lie between them; else the floor to raise the buffer to: every entry
// in (floor, last_read] was returned by the read.
//   - `first_read` is the successor of `read_from`: no id lies between them.
//   - The first entry is at or below `read_from` and XDEL removed nothing above it: the read
//     returned every entry above `read_from`.
//   - Else every entry above both the first entry's predecessor and the highest XDEL-removed id
//     still exists and was returned (ids only grow: none appeared below `last_read` after the
//     read). A stream emptied by a trim, then appended to, also lands here: the entries between
//     may never have existed, and the followers' catch-up through the LogReader finds that out.
//   - Unknown (the question failed, the stream is gone or empty): the whole read is suspect.
std::optional<EntryId> SkippedUpTo(const EntryId& read_from, const EntryId& first_read,
                                   const EntryId& last_read,
                                   const std::optional<StreamRemovals>& removals);

}  // namespace streamcar::log
