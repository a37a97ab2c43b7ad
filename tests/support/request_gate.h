#pragma once
// A gate a test handler's requests wait at until the test opens it: entries read stay pending
// and in flight while the test looks at what Redis and /metrics say. Shared between the handler's
// threads and the test (hold it in a shared_ptr); OpenAtExit opens it when the test ends, so a
// failed assertion never leaves a handler thread waiting out its timeout.

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace streamcar::testing {

struct RequestGate {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;

  void Open() {
    {
      std::lock_guard lock(mutex);
      open = true;
    }
    cv.notify_all();
  }
  // Waits until opened, or `at_most`.
  void Hold(std::chrono::milliseconds at_most) {
    std::unique_lock lock(mutex);
    cv.wait_for(lock, at_most, [&] { return open; });
  }
};

struct OpenAtExit {
  std::shared_ptr<RequestGate> gate;
  ~OpenAtExit() { gate->Open(); }
};

}  // namespace streamcar::testing
