#pragma once
// Group commit of the log API's single appends (SPEC section 10, POST .../entries with one
// entry): appends to one stream queue as data, not as waiting threads, and one drain sends
// everything queued in one script call (Producer::AppendAll), in arrival order, then whatever
// queued meanwhile, until the queue is empty. Under load a stream costs one Redis round trip and
// one worker wake-up per group instead of per append; alone, an append waits for nothing.
//
// Each append is decided on its own inside the group, exactly as it would be alone: its own
// idempotency key, its own explicit id, its own receipt. A malformed append never joins a group
// (it is refused before it queues), so it cannot fail the others. What fails the whole call fails
// every append of the group with the same status: Redis unreachable (the idempotency keys make
// the client's retry safe, as for one append) or a WRONGTYPE stream key.
//
// A lane is one target stream key (a sharded stream has one per shard), so there are at most
// 1 + shards lanes per stream whatever keys the entries carry. What a lane may hold waiting is
// bounded (kMaxQueued, kMaxQueuedBytes): past it an append is answered at once that Redis is too
// slow to take more (a 503 to retry), so clients that drop their connections cannot make the
// queue grow while Redis is slow. A group is cut at kMaxBatch appends or kMaxGroupBytes.
//
// Threads: Append from any thread (the API's loop); it never blocks on Redis. The drain it may
// return blocks on Redis and runs on a worker: at most one drain per lane runs at a time, so a
// stream's appends are sent in the order they queued.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/log/api_sessions.h"
#include "sidecar/log/producer.h"

namespace streamcar::log {

class AppendGroup {
 public:
  struct Outcome {
    Status status;        // not ok: the append's fate is unknown or it was refused
    AppendResult result;  // when status is ok
    int retry_after = 1;  // seconds to suggest when no session could be had
  };
  using Done = std::function<void(Outcome)>;

  static constexpr size_t kMaxQueued = 4 * Producer::kMaxBatch;
  static constexpr size_t kMaxQueuedBytes = size_t{32} << 20;
  // Entries' bytes in one script call (at least one entry): Redis holds its arguments at once.
  static constexpr size_t kMaxGroupBytes = size_t{4} << 20;

  // `producer` and `sessions` are borrowed and outlive the group. `session_wait`: how long a
  // drain waits for a free session.
  AppendGroup(const Producer* producer, SessionPool* sessions, Millis session_wait);

  // Queues `request`; `done` runs once with its outcome, on the thread that drains it (or at once,
  // on this thread, when the request is refused before it queues). Returns the drain to run off
  // the loop when none is running for the request's lane, else an empty function: the running
  // drain takes this append too.
  [[nodiscard]] std::function<void()> Append(AppendRequest request, Done done);

  // Groups sent so far, and appends in them (for tests and the benchmark's report).
  uint64_t groups_sent() const;
  uint64_t appends_sent() const;

 private:
  struct Queued {
    AppendRequest request;
    Done done;
    size_t bytes = 0;  // of its fields, id and keys
  };
  // The appends to one target stream key: one call appends in one slot.
  struct Lane {
    std::deque<Queued> waiting;  // arrival order
    size_t bytes = 0;            // of the waiting appends
  };

  // Sends the lane's groups until it is empty, then removes it.
  void Drain(const std::string& lane_key);
  // One call for `group`; runs every append's `done`. Called without the lock held.
  void Send(std::deque<Queued> group);

  const Producer* producer_;
  SessionPool* sessions_;
  Millis session_wait_;
  mutable std::mutex mutex_;
  // By target stream key; a lane exists while its drain runs. Guarded.
  std::map<std::string, Lane> lanes_;
  uint64_t groups_sent_ = 0;   // guarded
  uint64_t appends_sent_ = 0;  // guarded
};

}  // namespace streamcar::log
