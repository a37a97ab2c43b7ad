#include "sidecar/common/token_bucket.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace streamcar {

namespace {

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

SteadyClock::duration AfterSeconds(double seconds) {
  // Rounded up: at the time returned the token is there.
  return std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(std::ceil(seconds * 1e9) / 1e9));
}

}  // namespace

TokenBucket::TokenBucket(double rate, double burst) : rate_(rate), burst_(burst), tokens_(burst) {}

double TokenBucket::TokensAt(SteadyTime now) const {
  if (now <= at_) return tokens_;
  return std::min(burst_, tokens_ + rate_ * Seconds(now - at_));
}

void TokenBucket::Take(SteadyTime now) {
  tokens_ = TokensAt(now) - 1.0;
  at_ = std::max(at_, now);
}

SteadyTime TokenBucket::NextTokenAt(SteadyTime now) const {
  const double tokens = TokensAt(now);
  if (tokens >= kWhole) return now;
  // Below one token the bucket is not capped: the count grows linearly from `at_`.
  return std::max(now, at_ + AfterSeconds((1.0 - tokens_) / rate_));
}

SteadyTime TokenBucket::TokenCameAt(SteadyTime now) const {
  const double tokens = TokensAt(now);
  if (tokens < kWhole) return NextTokenAt(now);  // not there yet
  if (tokens_ >= kWhole) return at_;             // there since the last take (or the start)
  return at_ + AfterSeconds((1.0 - tokens_) / rate_);
}

}  // namespace streamcar
