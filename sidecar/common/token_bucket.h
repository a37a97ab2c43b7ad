#pragma once
// A token bucket (handler.max_rps, SPEC 11): `rate` tokens a second, up to `burst` kept; it
// starts full. One token is one request. Pure arithmetic on the times it is given: no clock,
// no waiting, so that a test drives it with a manual clock.

#include "sidecar/common/clock.h"

namespace streamcar {

class TokenBucket {
 public:
  // `rate` > 0 tokens a second; `burst` >= 1 tokens at most.
  TokenBucket(double rate, double burst);

  // Whether a whole token is there at `now`.
  bool HasToken(SteadyTime now) const { return TokensAt(now) >= kWhole; }
  // Takes one token at `now`. Taken without one (a caller's bug), the bucket goes below zero
  // and the next token comes that much later: the rate holds whatever happens.
  void Take(SteadyTime now);
  // When a whole token is there: `now` when there is one already.
  SteadyTime NextTokenAt(SteadyTime now) const;
  // When the token that is there at `now` came (the bucket's count last reached one whole
  // token); `now` minus nothing when it was full before. For the time a request waited on it.
  SteadyTime TokenCameAt(SteadyTime now) const;

  double TokensAt(SteadyTime now) const;

 private:
  // A token short of 1 by rounding only (the rate's division) counts as whole: a timer armed at
  // NextTokenAt must find the token there, never a sliver short of it, or it would be armed
  // again a nanosecond later.
  static constexpr double kWhole = 1.0 - 1e-9;

  const double rate_;   // tokens a second
  const double burst_;  // the most kept
  double tokens_;       // at `at_`
  SteadyTime at_{};
};

}  // namespace streamcar
