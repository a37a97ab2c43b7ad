#pragma once
// Time comes from an injected clock so that backoff, leases and beats are testable without
// sleeping.

#include <chrono>
#include <cstdint>

namespace streamcar {

using SteadyClock = std::chrono::steady_clock;
using SteadyTime = SteadyClock::time_point;
using Millis = std::chrono::milliseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time, for timers and deadlines.
  virtual SteadyTime Now() const = 0;
  // Wall-clock milliseconds since the Unix epoch, comparable with stream entry ids.
  virtual int64_t WallMillis() const = 0;
};

class SystemClock final : public Clock {
 public:
  SteadyTime Now() const override { return SteadyClock::now(); }
  int64_t WallMillis() const override {
    return std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  static const SystemClock& Instance() {
    static const SystemClock clock;
    return clock;
  }
};

// A clock that only moves when told to; for tests of timers and policies.
class ManualClock final : public Clock {
 public:
  SteadyTime Now() const override { return now_; }
  int64_t WallMillis() const override { return wall_ms_; }
  void Advance(Millis delta) {
    now_ += delta;
    wall_ms_ += delta.count();
  }
  void SetWallMillis(int64_t ms) { wall_ms_ = ms; }

 private:
  SteadyTime now_{};
  int64_t wall_ms_ = 1'700'000'000'000;
};

}  // namespace streamcar
