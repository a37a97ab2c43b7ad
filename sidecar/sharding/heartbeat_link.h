#pragma once
// The member's connection to the coordinator's slot (SHARDING.md B4), on the member's event loop.
// It carries one heartbeat at a time to an answer, the way the blocking Session carried it:
//
// - a beat that was not written (the connection is down or moving to the slot's new master), or
//   whose error says it ran nowhere (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN,
//   READONLY: the connection follows the slot itself), is sent again after a short backoff
//   (20 ms doubling to 500 ms, as RouteAttempt) until the beat's deadline;
// - NOSCRIPT (a restarted or failed-over node) loads the script and calls again, once;
// - a beat that was written and got no answer may have run: it is the caller's failure, not
//   retried (the next heartbeat reports again).
//
// Threads: loop thread only. `done` runs on the loop, never inside Beat.

#include <functional>
#include <memory>
#include <string>

#include "sidecar/common/backoff.h"
#include "sidecar/common/event_loop.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/async_connection.h"
#include "sidecar/redis/connector.h"
#include "sidecar/redis/reply.h"

namespace streamcar::sharding {

class HeartbeatLink {
 public:
  // Connects at once; the heartbeat script is loaded after each connect.
  HeartbeatLink(EventLoop& loop, redis::ConnectionOptions options, std::string role,
                redis::RedisHealth* health);
  ~HeartbeatLink();
  HeartbeatLink(const HeartbeatLink&) = delete;
  HeartbeatLink& operator=(const HeartbeatLink&) = delete;

  // Sends `call` (the heartbeat script's EVALSHA) and answers `done` once: the script's reply,
  // its error as kServerError, or the failure. Retries stop at `deadline`: a deadline already
  // passed makes it one try. One beat at a time: a Beat while one is under way is a bug.
  void Beat(redis::Command call, SteadyTime deadline,
            std::function<void(StatusOr<redis::Reply>)> done);
  bool busy() const { return beat_ != nullptr; }
  // Inside `done`: whether any try of that beat was written to Redis. A beat that never left
  // (Redis out of reach) is an outage, not a slow heartbeat, and is not timed.
  bool last_reached_redis() const { return last_reached_redis_; }
  bool connected() const { return connection_.connected(); }

  // After each (re)connect, once the script is loaded (and a beat waiting to be sent again has
  // gone).
  void OnReady(std::function<void()> callback) { on_ready_ = std::move(callback); }
  // A refusal retrying cannot fix (authentication, an untrusted certificate).
  void OnFatal(std::function<void(const Status&)> callback) {
    connection_.OnFatal(std::move(callback));
  }

 private:
  struct InFlight {
    redis::Command call;
    SteadyTime deadline;
    // The same short backoff RouteAttempt gives a transient cluster state: a MIGRATE batch or a
    // failover's first moments stay invisible to the member.
    RetryStreak retries{Millis(20), Millis(500)};
    bool loaded = false;         // NOSCRIPT is answered by one SCRIPT LOAD per beat
    bool reached_redis = false;  // a try was written (it may have run)
    std::function<void(StatusOr<redis::Reply>)> done;
  };

  void Send();
  // Connected again: a beat waiting out its backoff because it was not written goes now, so a
  // member's first heartbeat (and one after an outage) leaves as soon as the connection is up.
  void Ready();
  void OnResult(redis::BatchResult result);
  void LoadAndSend();
  // Sends again after the backoff, or ends the beat with `why` when the deadline comes first.
  void RetryOrFail(Status why);
  void End(StatusOr<redis::Reply> answer);

  EventLoop& loop_;
  redis::Connector connector_;  // before the connection: it outlives the openings it runs
  redis::AsyncConnection connection_;
  std::unique_ptr<EventLoop::Timer> retry_timer_;
  std::unique_ptr<InFlight> beat_;
  std::function<void()> on_ready_;
  bool last_reached_redis_ = false;
  // The least time a try is given when the beat's deadline is nearly up.
  static constexpr Millis kShortestTry{100};
};

}  // namespace streamcar::sharding
