#pragma once
// Exponential backoff with jitter: pure functions, so the policy is testable without sleeping.

#include "sidecar/common/clock.h"

namespace streamcar {

struct BackoffPolicy {
  Millis initial{1000};
  Millis max{60000};
  double multiplier = 2.0;
  double jitter = 0.2;  // +/- fraction of the computed delay
};

// The delay before delivery attempt `attempts + 1`, given that `attempts` deliveries failed:
// min(max, initial * multiplier^(attempts-1)), then scaled by (1 + jitter * (2*unit_random - 1)).
// `unit_random` is in [0, 1); pass 0.5 for no jitter. The result never exceeds policy.max.
Millis ComputeBackoff(const BackoffPolicy& policy, int attempts, double unit_random);

// A uniform number in [0, 1) from a thread-local generator.
double UnitRandom();

// Reconnect backoff: capped exponential with full jitter, for connections to Redis and the
// handler. Step 0 is the first retry.
Millis ReconnectDelay(int step, Millis initial, Millis cap, double unit_random);

// The one reconnect backoff of every Redis connection, watcher and retried Redis step (SPEC 4.1:
// capped exponential, jittered): 50-100 ms after the first failure, doubling to at most 5 s.
inline constexpr Millis kReconnectInitial{100};
inline constexpr Millis kReconnectCap{5000};

// A streak of failures and the delay before the next try, by ReconnectDelay. The bounds default
// to the reconnect backoff above; a caller with a reason of its own passes others (and says why).
class RetryStreak {
 public:
  constexpr RetryStreak() = default;
  constexpr RetryStreak(Millis initial, Millis cap) : initial_(initial), cap_(cap) {}
  // One more failure: the delay before the next try (jittered by UnitRandom).
  Millis Failed() { return ReconnectDelay(failures_++, initial_, cap_, UnitRandom()); }
  // It worked: the next failure starts from the initial delay again.
  void Succeeded() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  Millis initial_ = kReconnectInitial;
  Millis cap_ = kReconnectCap;
  int failures_ = 0;
};

}  // namespace streamcar
