#pragma once
// The Redis sessions of the API server: a small pool, so a request never touches a subscription's
// connection and never waits long for one of its own. A request borrows one session for its
// whole Redis work (a Session has one owning thread at a time).
//
// While Redis is unreachable, a failed connect closes the door for a moment: requests in that
// moment get "unavailable" at once (the API answers 503 with Retry-After) instead of each paying
// a connect timeout.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/session.h"

namespace streamcar::log {

class SessionPool {
 public:
  class Lease {
   public:
    Lease(SessionPool* pool, redis::Session* session) : pool_(pool), session_(session) {}
    ~Lease();
    Lease(Lease&& other) noexcept : pool_(other.pool_), session_(other.session_) {
      other.session_ = nullptr;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    redis::Session& session() { return *session_; }

   private:
    SessionPool* pool_;
    redis::Session* session_;
  };

  // The pool's sessions report to a health of their own: an idle pooled session that never
  // connected must not hold /readyz down (the server's probe session speaks for Redis).
  SessionPool(const redis::ConnectionOptions& options, int size);

  // A connected session, waiting up to `wait` for a free one. kUnavailable-style failures are
  // kIo with *retry_after set (seconds to suggest in Retry-After); kFatal when Redis refuses the
  // credentials.
  StatusOr<Lease> Acquire(Millis wait, int* retry_after);

 private:
  void Release(redis::Session* session);

  redis::RedisHealth health_;
  std::vector<std::unique_ptr<redis::Session>> sessions_;
  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<redis::Session*> free_;
  SteadyTime closed_until_{};
};

}  // namespace streamcar::log
