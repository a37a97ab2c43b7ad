#include "sidecar/log/api_sessions.h"

#include <algorithm>

namespace streamcar::log {

SessionPool::Lease::~Lease() {
  if (session_ != nullptr) pool_->Release(session_);
}

SessionPool::SessionPool(const redis::ConnectionOptions& options, int size) {
  // With a topology each command goes to its key's master (a cluster) or the current master
  // (Sentinel), following the servers' redirects (SPEC 8): the Session routes by itself.
  for (int i = 0; i < size; ++i) {
    sessions_.push_back(std::make_unique<redis::Session>(options, "api", &health_));
    free_.push_back(sessions_.back().get());
  }
}

void SessionPool::Release(redis::Session* session) {
  {
    std::lock_guard lock(mutex_);
    free_.push_back(session);
  }
  freed_.notify_one();
}

StatusOr<SessionPool::Lease> SessionPool::Acquire(Millis wait, int* retry_after) {
  *retry_after = 1;
  redis::Session* session = nullptr;
  {
    std::unique_lock lock(mutex_);
    if (SteadyClock::now() < closed_until_) {
      return Status(StatusCode::kIo, "Redis is unreachable");
    }
    if (!freed_.wait_for(lock, wait, [&] { return !free_.empty(); })) {
      return Status(StatusCode::kIo, "every API Redis session is busy");
    }
    session = free_.back();
    free_.pop_back();
  }
  Lease lease(this, session);
  Millis retry_in{0};
  Status connected = session->ConnectOnce(&retry_in);
  if (!connected.ok()) {
    if (connected.code() == StatusCode::kFatal) return connected;
    // Close the door for the backoff the session suggests (at most a second: Redis may be back
    // soon, and a client is told to retry after a whole second anyway).
    std::lock_guard lock(mutex_);
    closed_until_ = SteadyClock::now() + std::min(retry_in, Millis(1000));
    *retry_after = 1;
    return Status(StatusCode::kIo, "Redis is unreachable: " + connected.message());
  }
  return lease;
}

}  // namespace streamcar::log
