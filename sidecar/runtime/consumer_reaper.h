#pragma once
// Consumer reaping (SPEC 4.6, opt-in with consumer.reap_idle): one pass lists the group's
// consumers, picks those that are someone else, hold nothing pending and have been idle longer
// than reap_idle (redis/consumer_reaping.h), and removes them with the reap script, which checks
// all of that again atomically in Redis before XGROUP DELCONSUMER. Each removal is counted
// (streamcar_consumers_reaped_total) and logged with the consumer's name and idle time.
//
// A pass first refreshes this consumer's own idle time when it has been quiet for longer than
// kEvery with nothing pending (redis::NeedsRefresh: Redis 7.0 does not count an empty read as
// activity), so that a live sidecar of a fleet that reaps never looks idle to its peers.
//
// The claim beat runs a pass (PlainIntake, on its read connection, as one of its steps) when
// Due() says so: the first at a random offset in [0, kEvery) from the start (FirstPassOffset), so
// that the replicas of a rollout, started in the same minute, do not all list and reap at the
// same moment; then at most once per kEvery, timed by the loop's clock. A failed pass is logged
// and the next one comes a kEvery later; it never stops the subscription. An ACL refusal (the
// user lacks a rule reaping needs: no retry fixes it, and deploys do not notice, as the script is
// only sent once a candidate exists) turns reaping off for this subscription in this process,
// with one error naming the refused command and the missing rule: delivery goes on.
//
// Threads: loop thread only.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/async_connection.h"
#include "sidecar/redis/consumer_reaping.h"
#include "sidecar/runtime/cadences.h"

namespace prometheus {
class Counter;
}  // namespace prometheus

namespace streamcar::runtime {

class ConsumerReaper {
 public:
  // At most one pass per this long (SPEC 4.6: "at most once a minute").
  static constexpr Millis kEvery = cadence::kReapPass;
  // Names per script call: one call lists the consumers once (O(consumers)) for all of them, and
  // a group that has piled up thousands is cleared in a few calls, none of which holds Redis for
  // long.
  static constexpr size_t kBatch = 100;

  // The offset of the first pass from the start: `random` (any 64-bit draw) mapped onto
  // [0, kEvery).
  static Millis FirstPassOffset(uint64_t random);
  // The offset a process uses: STREAMCAR_TEST_REAP_OFFSET when it holds a duration below kEvery
  // (a test hook: tests cannot wait a random minute), else FirstPassOffset of a random_device draw.
  static Millis FirstPassOffsetForProcess();

  // `reaped` may be null (no metrics). `reap_idle` > 0. No pass is due before `first_pass_at`.
  ConsumerReaper(std::string subscription, std::string stream, std::string group,
                 std::string consumer, Millis reap_idle, SteadyTime first_pass_at,
                 prometheus::Counter* reaped);
  ~ConsumerReaper();
  ConsumerReaper(const ConsumerReaper&) = delete;
  ConsumerReaper& operator=(const ConsumerReaper&) = delete;

  // A pass may start at `now`: reaping is on, no pass is under way, and `now` is first_pass_at
  // or later, and kEvery or more after the last pass began.
  bool Due(SteadyTime now) const;
  // One pass on `connection`, begun at `now`. `done` runs once when it has ended; every failure
  // was logged here.
  void Run(redis::AsyncConnection* connection, SteadyTime now, std::function<void()> done);
  // An ACL refusal turned reaping off for good (in this process): Due() is false from then on.
  bool turned_off() const { return turned_off_; }
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
  void Finish();
  // Logs a failure of `command`; an ACL refusal turns reaping off (the pass then ends), with
  // `rules`, all the ACL rules `command` needs, in its error when the refusal names none.
  void Failed(std::string_view command, std::string_view rules, const Status& status);

  const std::string subscription_;
  const std::string stream_;
  const std::string group_;
  const std::string consumer_;
  const Millis reap_idle_;
  prometheus::Counter* reaped_;

  SteadyTime next_pass_at_;  // first_pass_at, then kEvery after each pass began
  bool turned_off_ = false;
  redis::AsyncConnection* connection_ = nullptr;
  std::function<void()> done_;
  std::vector<std::string> candidates_;
  size_t next_ = 0;        // the first candidate of the next batch
  bool reloaded_ = false;  // this pass loaded the script after a NOSCRIPT already
  bool recovery_requested_ = false;
  bool stopping_ = false;

  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace streamcar::runtime
