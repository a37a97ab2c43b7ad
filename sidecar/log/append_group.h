#pragma once
// Group commit of the log API's single appends (SPEC section 10, POST .../entries with one
// entry), sent from the API server's event loop: appends to one stream queue as data, and at the
// end of each round of the loop what a lane holds goes as one group (Producer::Prepare: one
// script call, or a pipeline of plain XADDs) on its event-loop connection (append_links.h), in
// arrival order. Up to kMaxInFlight groups of a lane are on their way at once: an append never
// waits for another group's round trip to Redis, and Redis, which runs one connection's commands
// in the order they came, appends them in the order they were sent. No thread waits on Redis: a
// group costs one write and one read on the loop, and its answers are written on the loop in the
// turn its reply arrives.
//
// Each append is decided on its own inside the group, exactly as it would be alone: its own
// idempotency key, its own explicit id, its own receipt. A malformed append never joins a group
// (it is refused before it queues), so it cannot fail the others. What fails the whole group fails
// every append of it with the same status: Redis unreachable or the connection lost with
// the call on its way (kIo/kTimeout; the idempotency keys make the client's retry safe, as for
// one append; of a plain pipeline, the XADDs answered before the loss keep their receipts) or a
// WRONGTYPE stream key.
//
// A lane is one target stream key (a sharded stream has one per shard), so there are at most
// 1 + shards lanes per stream whatever keys the entries carry. What a lane may hold waiting is
// bounded (kMaxQueued, kMaxQueuedBytes): past it an append is answered at once that Redis is too
// slow to take more (a 503 to retry), so clients that drop their connections cannot make the
// queue grow while Redis is slow. A group is cut at kMaxBatch appends or kMaxGroupBytes.
//
// A group that did not reach Redis, or that Redis sent elsewhere (Cluster MOVED or ASK, TRYAGAIN,
// CLUSTERDOWN, a demoted master: the script ran nowhere), goes back to the front of its lane and
// is sent again, ahead of what arrived since and behind the groups sent before it that went back
// too (the connection answers in the order it sent: a group sent later comes back later), once
// every group sent before it has answered. Each XADD of a plain pipeline is decided by its own
// reply (a receipt, or its own error such as OOM), and only the redirected ones after its last
// appended XADD go back. What went back never lands behind an append sent after it: once one of
// those lands, or a group sent after it fails once written (it may have run), what waits to go
// again is answered that nothing was appended (503, to retry). It is sent again once the
// lane's connection has followed its slot, up to kMaxTries sends and connect timeout + command
// timeout of holding; the same holding covers a connection still connecting. A connection whose
// last connect failed answers its lane's appends at once (503).
//
// Threads: the API server's loop thread only (or while the loop does not run).

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/event_loop.h"
#include "sidecar/common/status.h"
#include "sidecar/log/append_links.h"
#include "sidecar/log/producer.h"

namespace streamcar::log {

class AppendGroup {
 public:
  struct Outcome {
    Status status;        // not ok: the append's fate is unknown or it was refused
    AppendResult result;  // when status is ok
    int retry_after = 1;  // seconds to suggest in Retry-After when Redis could not take it
  };
  using Done = std::function<void(Outcome)>;

  static constexpr size_t kMaxQueued = 4 * Producer::kMaxBatch;
  static constexpr size_t kMaxQueuedBytes = size_t{32} << 20;
  // Entries' bytes in one group (at least one entry): Redis holds a script call's arguments at
  // once.
  static constexpr size_t kMaxGroupBytes = size_t{4} << 20;
  // Sends of one group that Redis redirected or that did not reach it (RouteLimits' redirects,
  // plus the first send).
  static constexpr int kMaxTries = 6;
  // Groups of one lane on their way to Redis at once. Past it, what arrives waits for an answer
  // and goes in the group after it.
  static constexpr size_t kMaxInFlight = 8;

  // `producer` and `links` are borrowed and outlive the group; the group sends on links' loop.
  AppendGroup(const Producer* producer, AppendLinks* links);
  ~AppendGroup();
  AppendGroup(const AppendGroup&) = delete;
  AppendGroup& operator=(const AppendGroup&) = delete;

  // Queues `request`; `done` runs once with its outcome, on the loop, never inside this call.
  // Returns the outcome instead (and drops `done`) when the request is refused before it queues:
  // malformed, or its lane full. A lane that is idle sends at the end of this round of the loop,
  // with whatever else the round queued.
  [[nodiscard]] std::optional<Outcome> Append(AppendRequest request, Done done);

  // Groups sent so far, and appends in them (for tests and the benchmark's report).
  uint64_t groups_sent() const { return groups_sent_; }
  uint64_t appends_sent() const { return appends_sent_; }

 private:
  struct Queued {
    AppendRequest request;
    Done done;
    size_t bytes = 0;  // of its fields, id and keys
  };
  // One call's appends, in arrival order.
  struct Group {
    uint64_t number = 0;  // the lane's sends so far, when it was sent
    std::vector<AppendRequest> requests;
    std::vector<Done> dones;
    std::vector<size_t> bytes;
  };
  // The appends to one target stream key: one call appends in one slot.
  struct Lane {
    std::deque<Queued> waiting;  // the groups that went back, in their order; then arrival order
    size_t requeued = 0;         // how many of `waiting` went back (at its front)
    size_t bytes = 0;            // of the waiting appends
    size_t in_flight = 0;        // groups of this lane awaiting their answers
    uint64_t sent = 0;           // groups this lane sent
    int tries = 0;               // sends of the group at the front that came to nothing
    // A group sent before the last try was counted met the same trouble: not another try.
    uint64_t counted_through = 0;
    bool load_script = false;  // Redis lost the script: load it in front of the next call
    std::optional<SteadyTime> held_since;  // waiting for its connection since
    std::optional<SteadyTime> hold_until;  // its backoff: no send before (another lane's kick)
  };
  using Lanes = std::map<std::string, Lane>;

  // Sends every idle lane that has appends waiting (the kick timer).
  void Kick();
  void KickIn(Millis delay);
  // Sends what the lane holds, while fewer than kMaxInFlight groups are out; removes an empty
  // lane with nothing out.
  void SendNext(const std::string& key);
  // `replies` are the appends' own (result's, without a SCRIPT LOAD in front of them).
  void OnAnswer(const std::string& key, Group group, Producer::Prepared prepared,
                std::span<const redis::Reply> replies, const redis::BatchResult& result);
  // What Redis answered to a script call, or to a plain group's XADDs: each append is decided,
  // or the group (of a plain one, the XADDs that Redis redirected) goes back. False when it went
  // back: the lane waits for its connection, or sent it again.
  bool SettleScript(Lanes::iterator it, Group group, Producer::Prepared prepared,
                    std::span<const redis::Reply> replies);
  bool SettlePlain(Lanes::iterator it, Group group, std::span<const redis::Reply> replies);
  static Outcome OutcomeOf(StatusOr<AppendResult> result);
  // Answers the appends that went back and wait to be sent again (503: they ran nowhere), once a
  // group sent after them has appended.
  void FailRequeued(const std::string& key);
  // The lane waits for its connection, or gives up when it waited too long.
  void Hold(Lanes::iterator lane);
  // Puts `group` back at the front of its lane, behind the groups that went back before it.
  static void Requeue(Lane& lane, Group group);
  // Counts a try of `group` that came to nothing; whether it may be sent again.
  static bool CountTry(Lane& lane, const Group& group);
  // Answers every waiting append of the lane with `status`; removes the lane unless groups of it
  // are out (their answers still come).
  void FailAll(Lanes::iterator lane, const Status& status);
  // Runs every `done` of `group` with its result, or with the failure of the whole call.
  static void Decide(Group& group, StatusOr<std::vector<AppendResult>> results);

  const Producer* producer_;
  AppendLinks* links_;
  Lanes lanes_;  // by target stream key; a lane exists while it has appends waiting or sent
  std::unique_ptr<EventLoop::Timer> kick_;
  uint64_t groups_sent_ = 0;
  uint64_t appends_sent_ = 0;
  // A connection outlives the groups that use it: its callbacks check this first.
  std::shared_ptr<bool> lifeline_ = std::make_shared<bool>(true);
};

}  // namespace streamcar::log
