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

}  // namespace streamcar
