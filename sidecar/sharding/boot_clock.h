#pragma once
// The member's lease clock (SHARDING.md B6): CLOCK_BOOTTIME, which "also includes any time spent
// in suspend", unlike steady_clock (CLOCK_MONOTONIC), which stops while a VM or host sleeps. Only
// its differences are used: a lease counts from the moment a heartbeat was sent.
//
// STREAMCAR_TEST_LEASE_CLOCK_RATE (tests only, B10.5) runs it at a rate: 0.5 makes a lease last
// twice as long as it should, to show that fences, not leases, keep the shards safe.

#include <cstdlib>
#include <ctime>
#include <string>

#include "sidecar/common/clock.h"

namespace streamcar::sharding {

class BootClock final : public Clock {
 public:
  explicit BootClock(double rate = RateFromEnvironment()) : rate_(rate), start_(Raw()) {}

  SteadyTime Now() const override {
    const auto elapsed = static_cast<double>((Raw() - start_).count()) * rate_;
    return start_ + std::chrono::nanoseconds(static_cast<int64_t>(elapsed));
  }
  int64_t WallMillis() const override { return SystemClock::Instance().WallMillis(); }

  static double RateFromEnvironment() {
    const char* text = std::getenv("STREAMCAR_TEST_LEASE_CLOCK_RATE");
    if (text == nullptr || *text == '\0') return 1.0;
    char* end = nullptr;
    const double rate = std::strtod(text, &end);
    return end != text && rate > 0 ? rate : 1.0;
  }

 private:
  static SteadyTime Raw() {
    timespec now{};
    clock_gettime(CLOCK_BOOTTIME, &now);
    return SteadyTime(std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec));
  }

  double rate_;
  SteadyTime start_;
};

}  // namespace streamcar::sharding
