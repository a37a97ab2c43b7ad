#pragma once
// Consumer reaping (SPEC 4.6, opt-in with consumer.reap_idle): one pass lists the group's
// consumers, picks those that are someone else, hold nothing pending and have been idle longer
// than reap_idle (redis/consumer_reaping.h), and removes them with the reap script, which checks
// all of that again atomically in Redis before XGROUP DELCONSUMER. Each removal is counted
// (streamcar_consumers_reaped_total) and logged with the consumer's name and idle time.
//
// A pass first refreshes this consumer's own idle time when it has been quiet for longer than
// kEvery with nothing pending (redis::NeedsRefresh: Redis does not count an empty read as
// activity), so that a live sidecar of a fleet that reaps never looks idle to its peers.
//
// The claim beat runs a pass (PlainIntake, on its read connection, as one of its steps) when
// Due() says so: at most once per kEvery, timed by the loop's clock. A failed or refused pass is
// logged and the next one comes a kEvery later; it never stops the subscription, except an ACL
// refusal, which Run() reports to its caller (the intake ends the subscription as for every
// command the ACL refuses: no retry fixes it).
//
// Threads: loop thread only.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/async_connection.h"
#include "sidecar/redis/consumer_reaping.h"

namespace prometheus {
class Counter;
}  // namespace prometheus

namespace streamcar::runtime {

class ConsumerReaper {
 public:
  // At most one pass per this long (SPEC 4.6: "at most once a minute").
  static constexpr Millis kEvery{60'000};
  // Names per script call: one call lists the consumers once (O(consumers)) for all of them, and
  // a group that has piled up thousands is cleared in a few calls, none of which holds Redis for
  // long.
  static constexpr size_t kBatch = 100;

  // `reaped` may be null (no metrics). `reap_idle` > 0.
  ConsumerReaper(std::string subscription, std::string stream, std::string group,
                 std::string consumer, Millis reap_idle, prometheus::Counter* reaped);
  ~ConsumerReaper();
  ConsumerReaper(const ConsumerReaper&) = delete;
  ConsumerReaper& operator=(const ConsumerReaper&) = delete;

  // A pass may start at `now`: none ran yet, or the last began kEvery ago or more.
  bool Due(SteadyTime now) const;
  // One pass on `connection`, begun at `now`. `done` runs once when it has ended, with OK or the
  // ACL refusal that ended it (every other failure was logged here).
  void Run(redis::AsyncConnection* connection, SteadyTime now, std::function<void(Status)> done);
  // Shutdown: a pass under way sends nothing after the step outstanding (its `done` follows that
  // step's reply), so the intake's stop waits for one command at most.
  void Stop() { stopping_ = true; }
  // The refresh brought an entry after all (see redis::RefreshConsumer): once, true when the
  // own pending list must be re-read for it.
  bool TakeRecoveryRequest() { return std::exchange(recovery_requested_, false); }

 private:
  void Listed(std::vector<redis::ConsumerInfo> consumers);
  void RunBatch();
  void ReloadThenRetry();
  void Finish(Status status);
  // Logs a failure; true when it is an ACL refusal (the pass ends with it).
  bool Failed(std::string_view step, const Status& status);

  const std::string subscription_;
  const std::string stream_;
  const std::string group_;
  const std::string consumer_;
  const Millis reap_idle_;
  prometheus::Counter* reaped_;

  std::optional<SteadyTime> last_pass_;
  redis::AsyncConnection* connection_ = nullptr;
  std::function<void(Status)> done_;
  std::vector<std::string> candidates_;
  size_t next_ = 0;        // the first candidate of the next batch
  bool reloaded_ = false;  // this pass loaded the script after a NOSCRIPT already
  bool recovery_requested_ = false;
  bool stopping_ = false;

  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace streamcar::runtime
