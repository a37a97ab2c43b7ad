#include "sidecar/runtime/shared_token_bucket.h"

#include <algorithm>

namespace streamcar::runtime {

SteadyTime SharedTokenBucket::NextTokenAt(SteadyTime now) const {
  std::lock_guard lock(mutex_);
  return bucket_.NextTokenAt(now);
}

std::optional<SteadyTime> SharedTokenBucket::TryTake(SteadyTime now) {
  std::lock_guard lock(mutex_);
  if (!bucket_.HasToken(now)) return std::nullopt;
  const SteadyTime came = std::min(now, bucket_.TokenCameAt(now));
  bucket_.Take(now);
  return came;
}

SteadyTime SharedTokenBucket::Take(SteadyTime now) {
  std::lock_guard lock(mutex_);
  const SteadyTime came = std::min(now, bucket_.TokenCameAt(now));
  bucket_.Take(now);
  return came;
}

}  // namespace streamcar::runtime
