#include "sidecar/common/backoff.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace streamcar {

Millis ComputeBackoff(const BackoffPolicy& policy, int attempts, double unit_random) {
  const double exponent = std::max(0, attempts - 1);
  double delay =
      static_cast<double>(policy.initial.count()) * std::pow(policy.multiplier, exponent);
  delay = std::min(delay, static_cast<double>(policy.max.count()));
  delay *= 1.0 + policy.jitter * (2.0 * unit_random - 1.0);
  delay = std::clamp(delay, 0.0, static_cast<double>(policy.max.count()));
  return Millis(static_cast<int64_t>(delay));
}

double UnitRandom() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(generator);
}

Millis ReconnectDelay(int step, Millis initial, Millis cap, double unit_random) {
  double ceiling = static_cast<double>(initial.count()) * std::pow(2.0, std::min(step, 30));
  ceiling = std::min(ceiling, static_cast<double>(cap.count()));
  // Half fixed, half jitter: never zero, and many sidecars restarting together spread out.
  return Millis(static_cast<int64_t>(ceiling * (0.5 + 0.5 * unit_random)));
}

}  // namespace streamcar
