#pragma once
// handler.max_rps's token bucket (common/token_bucket.h) as the loops that share it see it. The
// limit protects the one handler next to this process, so a sharded subscription's shard loops
// share one bucket (SPEC 11): a member holding some of the shards may use the whole max_rps, and
// one holding all of them still sends at most max_rps a second with a burst of concurrency. Each
// shard loop runs on its own thread (runtime/subscription_loop.h), hence the mutex; a plain
// subscription's one loop has a bucket of its own.
//
// Any thread. Times are the callers' (one clock, read on different threads: a time earlier than
// one already given counts as that one, as TokenBucket does).

#include <mutex>
#include <optional>

#include "sidecar/common/clock.h"
#include "sidecar/common/token_bucket.h"

namespace streamcar::runtime {

class SharedTokenBucket {
 public:
  // `rate` > 0 tokens a second; `burst` >= 1.
  SharedTokenBucket(double rate, double burst) : bucket_(rate, burst) {}

  // When a whole token is there: `now` when there is one already.
  SteadyTime NextTokenAt(SteadyTime now) const;
  // Takes a token if a whole one is there at `now`, in one step with the check: two loops that
  // both saw the last token cannot both take it. Returns when the token taken came (for the
  // time a request waited on it); nullopt when there was none.
  std::optional<SteadyTime> TryTake(SteadyTime now);
  // Takes a token whether or not one is there (the bucket goes into debt and the next token
  // comes that much later: the rate holds). Returns when it came, as TryTake does.
  SteadyTime Take(SteadyTime now);

 private:
  mutable std::mutex mutex_;
  TokenBucket bucket_;
};

}  // namespace streamcar::runtime
