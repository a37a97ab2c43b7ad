#pragma once
// Following streams live (SPEC section 10, SSE and `tail`): one blocking XREAD per followed stream,
// shared by every follower of it, on the hub's own thread and connection. A follower that starts
// below the live top first catches up through a LogReader (archive, then Redis), then joins the
// shared read with no gap and no duplicate; a follower that falls too far behind the shared read
// catches up again the same way instead of holding unbounded memory.

#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/common/stream_entry.h"
#include "sidecar/redis/connection.h"

namespace streamcar::log {

class ArchiveStore;

class Follower {
 public:
  virtual ~Follower() = default;
  // Waits up to `wait` for entries after the last one returned (or after the starting point) and
  // moves them into *out in id order; an empty *out after `wait` is not an error. kCancelled
  // after the hub stopped; kIo/kTimeout while Redis is unreachable (the follower stays usable
  // and resumes where it was). Called on one thread per follower.
  Status Next(std::vector<StreamEntry>* out, Millis wait) {
    return NextWithin(out, wait, std::numeric_limits<size_t>::max());
  }
  // The same, stopping once *out holds `max_bytes` of ids, field names and values (always at least
  // one entry when there is one): the follow pump gives each follower only what its client's
  // share of api.max_follow_buffer has room for, so that a page of large entries is not held
  // whole for a client that reads slowly. The entries left out come on the next call.
  virtual Status NextWithin(std::vector<StreamEntry>* out, Millis wait, size_t max_bytes) = 0;
};

// Tuning of the shared read; the defaults suit production, tests shrink them.
struct FollowOptions {
  // Recent entries kept per followed stream for followers to take from. A follower more than
  // this many entries behind the shared read catches up through a LogReader instead.
  size_t buffer_entries = 4096;
  // The same bound in bytes (ids, field names and values), so that large entries cannot make the
  // buffer hold GiBs; whichever bound is reached first drops the oldest entries.
  size_t buffer_bytes = size_t{64} << 20;
  // How long one shared XREAD blocks before it is issued again. A change of the followed set
  // interrupts it at once (CLIENT UNBLOCK); this bounds the wait when that is not possible.
  Millis block{2000};
};

class FollowHub {
 public:
  // `archive` may be null (Redis only); it is borrowed and outlives the hub. Starts the hub's
  // threads: one owns the shared blocking XREAD connection, one interrupts it when the set of
  // followed streams grows. Catch-up reads share one more connection.
  FollowHub(redis::ConnectionOptions options, ArchiveStore* archive, FollowOptions tuning = {});
  ~FollowHub();
  FollowHub(const FollowHub&) = delete;
  FollowHub& operator=(const FollowHub&) = delete;

  // Follows `stream` from just after `after_id` ("$" = from now on; "0-0" = from the start).
  // Thread-safe. The follower ends when it is destroyed; it may outlive the hub (its Next then
  // answers kCancelled).
  std::unique_ptr<Follower> Follow(const std::string& stream, const std::string& after_id);
  // The same, catching up through `archive` (may be null: Redis only) instead of the hub's; for
  // callers that archive only some streams (SPEC 10 `archive: true`).
  std::unique_ptr<Follower> Follow(const std::string& stream, const std::string& after_id,
                                   ArchiveStore* archive);
  // The followers of `stream` now (the streamcar_followers gauge).
  int FollowerCount(const std::string& stream) const;
  // Calls `on_change` whenever a followed stream's shared buffer got new entries, or a follower's
  // Next may answer differently for another reason (a stream became unreadable, Stop), so that a
  // caller carrying many followers on few threads (follow_pump.h) can sleep in between instead of
  // polling each one. It runs on a hub thread with no lock of the hub held and must not block;
  // it is not called once RemoveListener(id) has returned. Thread-safe.
  int AddListener(std::function<void()> on_change);
  void RemoveListener(int id);
  // Wakes every waiting follower with kCancelled and joins the hub's threads.
  void Stop();

  class Impl;  // opaque; public so that the followers it makes can reach it

 private:
  std::shared_ptr<Impl> impl_;  // shared with the followers, which may outlive the hub
};

}  // namespace streamcar::log
