#pragma once
// Carries every SSE follower of the log API (SPEC section 10) to its client on a fixed number of
// threads, whatever the number of followers: a follower is moved along only while its client
// takes what it was sent, so a client that stops reading costs at most its share of
// api.max_follow_buffer, never an unbounded queue.
//
// A follower whose queued output (http::Responder::queued_bytes) is at or above its share is
// paused: the pump stops taking entries from it, and its cursor stays where it was. Below it, a
// turn takes about what the rest of the share has room for (Follower::NextWithin) and queues its
// events one at a time while the queue is below the share; what does not fit waits, as entries,
// for the next turn. So a follower's queue stays within its share plus one event, whatever the
// entries' text costs (base64, escaped control characters). When the client has taken its bytes the
// pump resumes it from that cursor; if the hub's shared buffer has moved on meanwhile, the follower
// catches up through its LogReader (archive, then Redis), with no gap and no duplicate
// (follow_hub.h). A client that takes nothing for the server's write timeout is closed by the
// server (http/server.h).
//
// Each follower also gets a keep-alive comment after kKeepAliveInterval without an event, and is
// paced while Redis is unreachable (it resumes where it was). An error retrying cannot fix (the
// key became another type) and Stop end the stream with a final comment naming the reason.
//
// Threads: Add and Stop from any thread. The pump's own threads call Follower::Next and the
// Responder; a Follower is used by one pump thread at a time.

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/stream_entry.h"
#include "sidecar/http/service.h"
#include "sidecar/log/follow_hub.h"

namespace streamcar::log {

struct FollowPumpOptions {
  // Threads that move followers along (each may wait on a catch-up read from Redis or the
  // archive). A constant: docs/architecture.md counts them.
  int threads = 2;
  // Every follower's queued output together stays under this (api.max_follow_buffer); a follower's
  // share is this divided by the followers there are now.
  size_t max_buffer_bytes = size_t{64} << 20;
  Millis keep_alive{15000};
};

class FollowPump {
 public:
  // What the page a follower's start reads before its head should hold (Follower::NextWithin):
  // it waits, like every event, until the follower's queue is below its share.
  static constexpr size_t kFirstPageBytes = size_t{16} * 1024;

  // `hub` is borrowed and outlives the pump.
  FollowPump(FollowHub* hub, FollowPumpOptions options);
  ~FollowPump();  // Stop()
  FollowPump(const FollowPump&) = delete;
  FollowPump& operator=(const FollowPump&) = delete;

  // Takes over a follower whose stream head has been sent through `responder`: `first` (its first
  // page, already read, about kFirstPageBytes of it) is sent, then everything it gives, each
  // while the follower's queue is below its share. `on_end` runs once, on a pump thread,
  // when the follower ends for any reason (the client left, an error, Stop).
  void Add(std::unique_ptr<Follower> follower, std::vector<StreamEntry> first,
           http::Responder responder, std::function<void()> on_end);

  // Followers carried now.
  size_t size() const;

  // Ends every follower (final comment, Finish, on_end) and joins the threads. Add after Stop
  // ends the follower at once.
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamcar::log
