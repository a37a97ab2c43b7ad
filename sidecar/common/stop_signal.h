#pragma once
// A one-way "please stop" flag that sleeping threads can wait on, so shutdown never waits out a
// backoff or a beat interval. Thread-safe.

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "sidecar/common/clock.h"

namespace streamcar {

class StopSignal {
 public:
  void Request() {
    {
      std::lock_guard lock(mutex_);
      requested_ = true;
    }
    cv_.notify_all();
  }
  bool requested() const { return requested_.load(std::memory_order_acquire); }
  // Sleeps up to `duration`; returns true when stop was requested (at once or meanwhile).
  bool WaitFor(Millis duration) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, duration, [this] { return requested_.load(); });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<bool> requested_{false};
};

}  // namespace streamcar
