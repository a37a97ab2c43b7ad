#include "sidecar/runtime/settlement.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/common/log.h"
#include "sidecar/redis/settle_scripts.h"
#include "sidecar/runtime/metrics_observer.h"
#include "sidecar/sharding/fenced_ops.h"
#include "tests/unit/resp_reply.h"

namespace streamcar::runtime {
namespace {

using streamcar::testing::ArgsOf;
using streamcar::testing::Arr;
using streamcar::testing::Bulk;
using streamcar::testing::EntryResp;
using streamcar::testing::Err;
using streamcar::testing::Int;
using streamcar::testing::ReplyOf;
using Step = SettlePlan::Step;

// The id of an entry added at `ms` (wall time).
std::string IdAt(int64_t ms, int seq = 0) { return std::to_string(ms) + "-" + std::to_string(seq); }

StreamEntry Entry(const std::string& id, int attempts = 1) {
  StreamEntry e;
  e.id = id;
  e.fields.push_back({"k", "v"});
  e.attempts = attempts;
  return e;
}

redis::DeadLetterMeta Meta(const std::string& reason) {
  return {reason, "422", "bad", 1, 1'700'000'000'000};
}

// A reply for every span of a plan, from `answer` (RESP text per command of the span).
using Answer = std::function<std::vector<std::string>(const SettlePlan::Span&)>;
redis::BatchResult Answered(const SettlePlan& plan, const Answer& answer) {
  redis::BatchResult result;
  for (const auto& span : plan.spans) {
    std::vector<std::string> resp;
    if (span.step == Step::kLoadScripts) {
      resp.assign(span.end - span.begin, Bulk("sha"));
    } else {
      resp = answer(span);
    }
    EXPECT_EQ(resp.size(), span.end - span.begin) << Name(span.step);
    for (const auto& r : resp) result.replies.push_back(ReplyOf(r));
  }
  return result;
}

// The usual success reply of each step.
std::vector<std::string> Success(const SettlePlan::Span& span) {
  switch (span.step) {
    case Step::kKeepAlive:
      return {Arr({})};
    case Step::kAck:
    case Step::kGoneAck:
      return {Int(static_cast<int64_t>(span.ids.size()))};
    case Step::kDeadLetter:
      return {Int(1)};
    case Step::kRetryClaim: {
      std::vector<std::string> entries;
      for (const auto& id : span.ids) entries.push_back(EntryResp(id, {"k", "v"}));
      return {Arr({Arr(entries), Arr({})})};
    }
    case Step::kUndoReads:
      return {Int(static_cast<int64_t>(span.ids.size()))};
    case Step::kDeadLetterCheck:  // still pending for c1
      return {Arr({Arr({Bulk(span.ids.front()), Bulk("c1"), Int(5), Int(1)})})};
    case Step::kDeadLetterAck:
      return {Int(1)};
    case Step::kDeadLetterWrite:
      return {Bulk("1800000000000-0")};
    case Step::kReplicaWait:
      return {Int(1)};
    case Step::kReplicaProbe:  // a master without replicas
      return {Arr({Bulk("master"), Int(0), Arr({})})};
    case Step::kLoadScripts:
      break;
  }
  return {};
}

std::vector<Step> Steps(const SettlePlan& plan) {
  std::vector<Step> steps;
  for (const auto& span : plan.spans) steps.push_back(span.step);
  return steps;
}

std::vector<std::string> IdsOf(const SettlePlan& plan, Step step) {
  std::vector<std::string> ids;
  for (const auto& span : plan.spans) {
    if (span.step == step) ids.insert(ids.end(), span.ids.begin(), span.ids.end());
  }
  return ids;
}

class SettlementTest : public ::testing::Test {
 protected:
  SettlementTest() {
    clock_.SetWallMillis(kNowMs);
    SetLogClockForTest(&clock_);
    SetLogSinkForTest([this](std::string_view line) { logs_.emplace_back(line); });
  }
  ~SettlementTest() override {
    SetLogSinkForTest(nullptr);
    SetLogClockForTest(nullptr);
  }

  SteadyTime now() const { return clock_.Now(); }

  // Held in flight, then accepted (2xx): kAcking.
  void Accepted(const std::string& id) {
    ASSERT_EQ(ledger_.Admit({Entry(id)}), 1u);
    auto refs = ledger_.TakeReady(100, now());
    ASSERT_EQ(refs.size(), 1u);
    ASSERT_EQ(ledger_.Accept(refs[0]), EntryLedger::Applied::kApplied);
  }
  // Held in flight, then failed with a retry due at `at`.
  void WaitingRetry(const std::string& id, SteadyTime at, int attempts = 1) {
    ASSERT_EQ(ledger_.Admit({Entry(id, attempts)}), 1u);
    auto refs = ledger_.TakeReady(100, now());
    ASSERT_EQ(refs.size(), 1u);
    ASSERT_EQ(ledger_.ScheduleRetry(refs[0], at), EntryLedger::Applied::kApplied);
  }
  // Held in flight, then to be dead-lettered.
  void DeadLettering(const std::string& id) {
    ASSERT_EQ(ledger_.Admit({Entry(id)}), 1u);
    auto refs = ledger_.TakeReady(100, now());
    ASSERT_EQ(refs.size(), 1u);
    ASSERT_EQ(ledger_.DeadLetter(refs[0]), EntryLedger::Applied::kApplied);
  }

  // Takes the plan due now, answers it with `answer`, applies it.
  SettlePlan RoundTrip(const Answer& answer = Success) {
    auto plan = settlement_.TakeDue(now());
    EXPECT_TRUE(plan.has_value());
    if (!plan) return {};
    settlement_.Apply(*plan, Answered(*plan, answer), now());
    return *plan;
  }

  double Failures(SettleClass c) const { return metrics_.SettleFailed(Name(c))->Value(); }
  double Acked() const { return metrics_.acked->Value(); }
  double Rejected() const {
    return metrics_.DeadLettered(delivery::DeadLetterReason::kRejected)->Value();
  }
  uint64_t EndToEndCount() const { return metrics_.end_to_end->Collect().histogram.sample_count; }
  // The log lines containing every one of `parts`.
  size_t Logged(const std::vector<std::string>& parts) const {
    size_t n = 0;
    for (const auto& line : logs_) {
      bool all = true;
      for (const auto& part : parts) all = all && line.find(part) != std::string::npos;
      if (all) ++n;
    }
    return n;
  }

  static config::Subscription Sub() {
    config::Subscription sub;
    sub.name = "orders/billing";
    sub.stream = "orders";
    sub.group = "billing";
    sub.dead_letter.stream = "orders:dlq";
    sub.claim.min_idle = Millis(600);  // a keepalive every 200 ms
    return sub;
  }

  static constexpr int64_t kNowMs = 1'800'000'000'000;
  config::Subscription sub_ = Sub();
  ManualClock clock_;
  redis::PlainOps ops_{"orders", "billing", "c1"};
  EntryLedger ledger_{100, ""};
  admin::Metrics registry_;
  admin::SubscriptionMetrics& metrics_ = registry_.ForSubscription("orders/billing");
  MetricsObserver observer_{&metrics_};
  std::vector<std::string> logs_;
  Settlement settlement_{sub_, ops_, &ledger_, &observer_, clock_};
};

TEST_F(SettlementTest, KeepaliveEveryThirdOfMinIdle) {
  EXPECT_EQ(settlement_.keepalive_interval(), Millis(200));
}

TEST_F(SettlementTest, DeliveredAcksAreConfirmedCountedAndTimed) {
  const std::string id = IdAt(kNowMs - 1500);
  Accepted(id);
  settlement_.QueueAck(id, /*delivered=*/true);
  EXPECT_FALSE(settlement_.Idle());
  SettlePlan plan = RoundTrip();
  EXPECT_EQ(Steps(plan), (std::vector<Step>{Step::kAck}));
  EXPECT_EQ(ArgsOf(plan.commands[0]), (std::vector<std::string>{"XACK", "orders", "billing", id}));
  EXPECT_FALSE(ledger_.Holds(id)) << "the room is freed once the XACK landed";
  EXPECT_EQ(Acked(), 1);
  EXPECT_EQ(EndToEndCount(), 1u);
  EXPECT_DOUBLE_EQ(metrics_.end_to_end->Collect().histogram.sample_sum, 1.5);
  EXPECT_TRUE(settlement_.Idle());
}

TEST_F(SettlementTest, PayloadGoneAcksCountAsAckedButNotInTheLatency) {
  ASSERT_EQ(ledger_.AdmitForAck("5-0"), 1u);
  settlement_.QueueAck("5-0", /*delivered=*/false);
  SettlePlan plan = RoundTrip();
  EXPECT_EQ(Steps(plan), (std::vector<Step>{Step::kGoneAck}));
  EXPECT_FALSE(ledger_.Holds("5-0"));
  EXPECT_EQ(Acked(), 1);
  EXPECT_EQ(EndToEndCount(), 0u);
}

TEST_F(SettlementTest, TheAckModeShapesTheCommand) {
  settlement_.SetAckMode(redis::AckMode::kAckDel);
  Accepted("1-0");
  settlement_.QueueAck("1-0", true);
  SettlePlan plan = RoundTrip();
  EXPECT_EQ(ArgsOf(plan.commands[0])[0], "XACKDEL");
}

// SPEC 4.3 "definite": the entry stays held, the step is tried again after a capped backoff.
TEST_F(SettlementTest, ARefusedAckIsKeptAndRetriedAfterABackoff) {
  Accepted("1-0");
  settlement_.QueueAck("1-0", true);
  RoundTrip([](const SettlePlan::Span&) {
    return std::vector<std::string>{Err("OOM command not allowed when used memory > 'maxmemory'")};
  });
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kAcking);
  EXPECT_EQ(Failures(SettleClass::kDefinite), 1);
  EXPECT_EQ(Acked(), 0);
  EXPECT_EQ(Logged({"acknowledgement refused by Redis; will retry", "\"class\":\"definite\"",
                    "OOM command not allowed"}),
            1u);
  EXPECT_FALSE(settlement_.Idle());
  // The first step of the backoff is 50-100 ms.
  clock_.Advance(Millis(49));
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value());
  auto due = settlement_.NextDue(now());
  ASSERT_TRUE(due.has_value());
  EXPECT_GT(*due, now());
  EXPECT_LE(*due, now() + Millis(51));
  clock_.Advance(Millis(51));
  SettlePlan again = RoundTrip();
  EXPECT_EQ(IdsOf(again, Step::kAck), (std::vector<std::string>{"1-0"}));
  EXPECT_FALSE(ledger_.Holds("1-0"));
  EXPECT_EQ(Acked(), 1);
}

TEST_F(SettlementTest, TheBackoffDoublesUpToFiveSeconds) {
  StepBackoff backoff;
  SteadyTime t{};
  Millis last{0};
  for (int i = 0; i < 12; ++i) {
    backoff.Failed(t);
    last = std::chrono::duration_cast<Millis>(backoff.retry_at - t);
    EXPECT_LE(last, Millis(5000));
    if (i == 0) {
      EXPECT_GE(last, Millis(50));
      EXPECT_LT(last, Millis(100));
    }
  }
  EXPECT_GE(last, Millis(2500));
  backoff.Succeeded();
  EXPECT_TRUE(backoff.Due(t));
  backoff.Failed(t);
  EXPECT_LT(backoff.retry_at - t, Millis(100)) << "a success starts over";
}

TEST_F(SettlementTest, AtMostOnePlanIsInFlight) {
  Accepted("1-0");
  settlement_.QueueAck("1-0", true);
  auto plan = settlement_.TakeDue(now());
  ASSERT_TRUE(plan.has_value());
  Accepted("2-0");
  settlement_.QueueAck("2-0", true);
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value());
  EXPECT_FALSE(settlement_.NextDue(now()).has_value());
  EXPECT_FALSE(settlement_.Idle());
  settlement_.Apply(*plan, Answered(*plan, Success), now());
  EXPECT_EQ(settlement_.NextDue(now()), now());
  SettlePlan next = RoundTrip();
  EXPECT_EQ(IdsOf(next, Step::kAck), (std::vector<std::string>{"2-0"}));
  EXPECT_TRUE(settlement_.Idle());
}

TEST_F(SettlementTest, ADeadLetterWrittenIsLoggedCountedAndReleased) {
  DeadLettering("7-0");
  redis::DeadLetterMeta meta = Meta("rejected");
  meta.attempts = 2;
  settlement_.QueueDeadLetter("7-0", meta);
  SettlePlan plan = RoundTrip();
  ASSERT_EQ(Steps(plan), (std::vector<Step>{Step::kDeadLetter}));
  const auto args = ArgsOf(plan.commands[0]);
  EXPECT_EQ(args[1], redis::DeadLetterScript().sha());
  EXPECT_EQ(args[4], "orders:dlq");
  EXPECT_FALSE(ledger_.Holds("7-0"));
  EXPECT_EQ(Rejected(), 1);
  EXPECT_EQ(Acked(), 1) << "a dead letter acknowledges the entry";
  EXPECT_EQ(EndToEndCount(), 0u);
  EXPECT_EQ(Logged({"\"msg\":\"entry dead-lettered\"", "\"id\":\"7-0\"", "\"reason\":\"rejected\"",
                    "\"attempts\":2", "\"status\":\"422\""}),
            1u);
  EXPECT_TRUE(settlement_.Idle());
}

TEST_F(SettlementTest, ADeadLetterNoLongerOursIsALostLease) {
  DeadLettering("7-0");
  settlement_.QueueDeadLetter("7-0", Meta("rejected"));
  RoundTrip([](const SettlePlan::Span&) { return std::vector<std::string>{Int(0)}; });
  EXPECT_FALSE(ledger_.Holds("7-0"));
  EXPECT_EQ(Failures(SettleClass::kLostLease), 1);
  EXPECT_EQ(Rejected(), 0);
  EXPECT_EQ(Acked(), 0);
  EXPECT_EQ(Logged({"dead letter not written: the entry is no longer this consumer's (lost lease)",
                    "\"class\":\"lost_lease\"", "\"id\":\"7-0\""}),
            1u);
}

// SettlementTest.DeadLetterKeyThatChangesTypeWhileRunningLosesNothing, as pure logic.
TEST_F(SettlementTest, ARefusedDeadLetterStaysHeldAndIsWrittenLater) {
  DeadLettering("7-0");
  settlement_.QueueDeadLetter("7-0", Meta("rejected"));
  RoundTrip([](const SettlePlan::Span&) {
    return std::vector<std::string>{Err("WRONGTYPE Operation against a key")};
  });
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLettering);
  EXPECT_EQ(Failures(SettleClass::kDefinite), 1);
  EXPECT_EQ(
      Logged({"cannot write dead letter; the entry stays pending and is tried again",
              "\"class\":\"definite\"", "\"dead_letter_stream\":\"orders:dlq\"", "WRONGTYPE"}),
      1u);
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "backing off";
  clock_.Advance(Millis(100));
  SettlePlan again = RoundTrip();
  EXPECT_EQ(IdsOf(again, Step::kDeadLetter), (std::vector<std::string>{"7-0"}));
  ASSERT_EQ(again.spans.size(), 1u);
  EXPECT_EQ(again.spans[0].meta.reason, "rejected") << "the record is the one first queued";
  EXPECT_FALSE(ledger_.Holds("7-0"));
  EXPECT_EQ(Rejected(), 1);
}

TEST_F(SettlementTest, ARetryClaimedGoesBackToTheQueueWithOneMoreAttempt) {
  WaitingRetry("4-0", now() + Millis(1000), 2);
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value());
  EXPECT_EQ(settlement_.NextDue(now()), now() + Millis(200)) << "the keepalive comes first";
  clock_.Advance(Millis(1000));
  SettlePlan plan = RoundTrip();
  EXPECT_EQ(IdsOf(plan, Step::kRetryClaim), (std::vector<std::string>{"4-0"}));
  EXPECT_EQ(ledger_.StateOf("4-0"), EntryState::kQueued);
  EXPECT_EQ(ledger_.Find("4-0")->attempts, 3);
  EXPECT_EQ(ledger_.UnpostedIds(), (std::vector<std::string>{"4-0"})) << "claimed, not posted";
}

TEST_F(SettlementTest, ARetryClaimOfAnEntryAPeerOwnsIsALostLease) {
  WaitingRetry("4-0", now());
  RoundTrip([](const SettlePlan::Span& span) {
    if (span.step != Step::kRetryClaim) return Success(span);
    return std::vector<std::string>{Arr({Arr({}), Arr({Bulk("4-0")})})};
  });
  EXPECT_FALSE(ledger_.Holds("4-0"));
  EXPECT_EQ(Failures(SettleClass::kLostLease), 1);
  EXPECT_EQ(Logged({"retry not claimed: the entry is another consumer's now (lost lease)",
                    "\"class\":\"lost_lease\"", "\"id\":\"4-0\""}),
            1u);
}

// Ours, but the payload is gone: counted as deleted, acknowledged (not as a delivery), never
// POSTed again.
TEST_F(SettlementTest, ARetryClaimWhosePayloadIsGoneIsAcknowledged) {
  WaitingRetry("4-0", now());
  RoundTrip([](const SettlePlan::Span& span) {
    if (span.step != Step::kRetryClaim) return Success(span);
    return std::vector<std::string>{
        Arr({Arr({Arr({Bulk("4-0"), streamcar::testing::Nil()})}), Arr({})})};
  });
  EXPECT_EQ(ledger_.StateOf("4-0"), EntryState::kAcking);
  EXPECT_EQ(metrics_.deleted_entries->Value(), 1);
  SettlePlan ack = RoundTrip();
  EXPECT_EQ(Steps(ack), (std::vector<Step>{Step::kGoneAck}));
  EXPECT_FALSE(ledger_.Holds("4-0"));
  EXPECT_EQ(Acked(), 1);
  EXPECT_EQ(EndToEndCount(), 0u);
}

// SettlementTest.ErrorReplyToARetryClaimKeepsTheEntry, as pure logic: an error is "unknown",
// never "gone".
TEST_F(SettlementTest, ARefusedRetryClaimWaitsAndIsClaimedLater) {
  WaitingRetry("4-0", now());
  RoundTrip([](const SettlePlan::Span& span) {
    if (span.step != Step::kRetryClaim) return Success(span);
    return std::vector<std::string>{Err("NOPERM this user has no permissions")};
  });
  EXPECT_EQ(ledger_.StateOf("4-0"), EntryState::kWaitingRetry);
  EXPECT_EQ(Failures(SettleClass::kDefinite), 1);
  EXPECT_EQ(metrics_.deleted_entries->Value(), 0);
  EXPECT_EQ(Acked(), 0);
  EXPECT_EQ(Logged({"retry claim refused by Redis; the entries stay held and are tried again",
                    "\"class\":\"definite\"", "NOPERM"}),
            1u);
  auto retry_at = ledger_.NextRetryAt();
  ASSERT_TRUE(retry_at.has_value());
  EXPECT_GE(*retry_at, now() + Millis(50));
  EXPECT_LE(*retry_at, now() + Millis(100));
  clock_.Advance(Millis(100));
  SettlePlan again = RoundTrip();
  EXPECT_EQ(IdsOf(again, Step::kRetryClaim), (std::vector<std::string>{"4-0"}));
  EXPECT_EQ(ledger_.StateOf("4-0"), EntryState::kQueued);
  EXPECT_EQ(ledger_.Find("4-0")->attempts, 2);
}

// SettlementTest.NoRetryClaimOnceShutdownBegan, as pure logic.
TEST_F(SettlementTest, NoRetryIsClaimedWhileDraining) {
  WaitingRetry("4-0", now());
  Accepted("1-0");
  settlement_.QueueAck("1-0", true);
  settlement_.BeginDraining();
  SettlePlan plan = RoundTrip();
  EXPECT_EQ(Steps(plan), (std::vector<Step>{Step::kAck}));
  EXPECT_EQ(ledger_.StateOf("4-0"), EntryState::kWaitingRetry);
  EXPECT_TRUE(settlement_.Idle()) << "a waiting retry is not settlement work once draining";
  EXPECT_EQ(settlement_.NextDue(now()), now() + Millis(200)) << "only the keepalive is scheduled";
}

// SPEC 4.5: a failure the handler answers once shutdown has begun waits as a retry, like any
// other. It is never a dead letter, and it is not claimed again (no delivery follows): the entry
// stays pending for a restart or a peer (ShutdownTest.AFailureAnsweredDuringTheDrain... end to
// end).
TEST_F(SettlementTest, ARetryAnsweredWhileDrainingIsNeitherDeadLetteredNorClaimed) {
  ASSERT_EQ(ledger_.Admit({Entry("5-0", /*attempts=*/2)}), 1u);
  auto refs = ledger_.TakeReady(1, now());
  ASSERT_EQ(refs.size(), 1u);
  settlement_.BeginDraining();
  settlement_.OnOutcome(refs[0], delivery::Decision{delivery::Action::kRetry, Millis(50)}, now());
  EXPECT_EQ(ledger_.StateOf("5-0"), EntryState::kWaitingRetry);
  EXPECT_EQ(settlement_.queued_dead_letters(), 0u);
  clock_.Advance(Millis(200));  // the retry is due, and so is the keepalive
  SettlePlan plan = RoundTrip();
  EXPECT_EQ(Steps(plan), (std::vector<Step>{Step::kKeepAlive}))
      << "neither a dead letter (a shutdown never writes one) nor a retry claim (no delivery "
         "follows)";
  EXPECT_EQ(ledger_.StateOf("5-0"), EntryState::kWaitingRetry);
  EXPECT_EQ(metrics_.DeadLettered(delivery::DeadLetterReason::kMaxAttempts)->Value(), 0);
}

TEST_F(SettlementTest, TheKeepaliveRunsEveryPeriodOverEveryHeldEntryButAcks) {
  Accepted("3-0");
  ASSERT_EQ(ledger_.Admit({Entry("1-0"), Entry("2-0")}), 2u);
  clock_.Advance(Millis(199));
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value());
  EXPECT_EQ(settlement_.NextDue(now()), now() + Millis(1));
  clock_.Advance(Millis(1));
  SettlePlan plan = RoundTrip();
  ASSERT_EQ(Steps(plan), (std::vector<Step>{Step::kKeepAlive}));
  auto ids = IdsOf(plan, Step::kKeepAlive);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"1-0", "2-0"}));
  EXPECT_EQ(settlement_.NextDue(now()), now() + Millis(200));
  clock_.Advance(Millis(199));
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value());
  clock_.Advance(Millis(1));
  EXPECT_EQ(Steps(RoundTrip()), (std::vector<Step>{Step::kKeepAlive}));
}

TEST_F(SettlementTest, AKeepaliveWithNothingHeldSendsNothing) {
  clock_.Advance(Millis(200));
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value());
  EXPECT_EQ(settlement_.NextDue(now()), now() + Millis(200));
}

// A held entry another consumer owns is dropped and counted once; one the ledger leaves to its
// own owner-checked step is not counted here.
TEST_F(SettlementTest, AKeepaliveLostIdIsDroppedAndCountedOnce) {
  DeadLettering("3-0");
  ASSERT_EQ(ledger_.Admit({Entry("1-0"), Entry("2-0")}), 2u);
  clock_.Advance(Millis(200));
  RoundTrip([](const SettlePlan::Span&) {
    return std::vector<std::string>{Arr({Bulk("1-0"), Bulk("3-0"), Bulk("9-0")})};
  });
  EXPECT_FALSE(ledger_.Holds("1-0"));
  EXPECT_TRUE(ledger_.Holds("2-0"));
  EXPECT_EQ(ledger_.StateOf("3-0"), EntryState::kDeadLettering);
  EXPECT_EQ(Failures(SettleClass::kLostLease), 1);
  EXPECT_EQ(Logged({"lease lost: another consumer owns the entry now; it is not delivered again "
                    "here",
                    "\"class\":\"lost_lease\"", "\"id\":\"1-0\""}),
            1u);
}

// A refused keepalive is definite and tried again sooner than a whole period.
TEST_F(SettlementTest, ARefusedKeepaliveIsRetriedAfterItsBackoff) {
  ASSERT_EQ(ledger_.Admit({Entry("1-0")}), 1u);
  clock_.Advance(Millis(200));
  RoundTrip([](const SettlePlan::Span&) {
    return std::vector<std::string>{Err("BUSY Redis is busy running a script")};
  });
  EXPECT_EQ(Failures(SettleClass::kDefinite), 1);
  EXPECT_EQ(Logged({"lease keepalive refused by Redis; trying again soon", "BUSY"}), 1u);
  EXPECT_TRUE(ledger_.Holds("1-0"));
  auto due = settlement_.NextDue(now());
  ASSERT_TRUE(due.has_value());
  EXPECT_GE(*due, now() + Millis(50));
  EXPECT_LT(*due, now() + Millis(100));
  clock_.Advance(Millis(100));
  EXPECT_EQ(Steps(RoundTrip()), (std::vector<Step>{Step::kKeepAlive}));
  EXPECT_EQ(settlement_.NextDue(now()), now() + Millis(200)) << "a success is a whole period";
}

TEST_F(SettlementTest, AcksLingerToShareACommand) {
  settlement_.SetAckLinger(Millis(50));
  Accepted("1-0");
  settlement_.QueueAck("1-0", true);
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value());
  EXPECT_EQ(settlement_.NextDue(now()), now() + Millis(50));
  clock_.Advance(Millis(30));
  Accepted("2-0");
  settlement_.QueueAck("2-0", true);
  EXPECT_EQ(settlement_.NextDue(now()), now() + Millis(20)) << "the oldest sets the time";
  clock_.Advance(Millis(20));
  SettlePlan plan = RoundTrip();
  EXPECT_EQ(IdsOf(plan, Step::kAck), (std::vector<std::string>{"1-0", "2-0"}));
}

// The entries being acknowledged keep their room: at a quarter of the capacity they go at once.
TEST_F(SettlementTest, AcksHoldingAQuarterOfTheRoomFlushAtOnce) {
  settlement_.SetAckLinger(Millis(1000));
  for (int i = 0; i < 24; ++i) {
    Accepted(IdAt(i));
    settlement_.QueueAck(IdAt(i), true);
  }
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "24 of 100: still lingering";
  Accepted(IdAt(24));
  settlement_.QueueAck(IdAt(24), true);
  EXPECT_EQ(settlement_.NextDue(now()), now());
  SettlePlan plan = RoundTrip();
  EXPECT_EQ(IdsOf(plan, Step::kAck).size(), 25u);
}

// At shutdown nothing is worth waiting for: the drain deadline is better spent settling.
TEST_F(SettlementTest, ADrainingSubscriptionDoesNotLinger) {
  settlement_.SetAckLinger(Millis(1000));
  Accepted("1-0");
  settlement_.QueueAck("1-0", true);
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value());
  settlement_.BeginDraining();
  EXPECT_EQ(settlement_.NextDue(now()), now());
  SettlePlan plan = RoundTrip();
  EXPECT_EQ(IdsOf(plan, Step::kAck), (std::vector<std::string>{"1-0"}));
}

TEST_F(SettlementTest, AThousandQueuedAcksFlushAtOnce) {
  EntryLedger big(100'000, "");
  Settlement settlement(sub_, ops_, &big, &observer_, clock_);
  settlement.SetAckLinger(Millis(1000));
  for (int i = 0; i < 999; ++i) {
    ASSERT_EQ(big.AdmitForAck(IdAt(i)), 1u);
    settlement.QueueAck(IdAt(i), false);
  }
  EXPECT_FALSE(settlement.TakeDue(now()).has_value());
  ASSERT_EQ(big.AdmitForAck(IdAt(999)), 1u);
  settlement.QueueAck(IdAt(999), false);
  auto plan = settlement.TakeDue(now());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(IdsOf(*plan, Step::kGoneAck).size(), 1000u);
}

// The connection broke after the keepalive was answered: it is applied; the ack, the dead letter
// and the retry claim sent without an answer are released, counted ambiguous, and a recovery of
// the own pending list is requested (once).
TEST_F(SettlementTest, AnAmbiguousResultReleasesAndAsksForRecovery) {
  Accepted("1-0");
  settlement_.QueueAck("1-0", true);
  DeadLettering("7-0");
  settlement_.QueueDeadLetter("7-0", Meta("rejected"));
  WaitingRetry("4-0", now());
  ASSERT_EQ(ledger_.Admit({Entry("9-0")}), 1u);
  clock_.Advance(Millis(200));
  auto plan = settlement_.TakeDue(now());
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(Steps(*plan), (std::vector<Step>{Step::kKeepAlive, Step::kAck, Step::kDeadLetter,
                                             Step::kRetryClaim}));
  redis::BatchResult result;
  result.replies.push_back(ReplyOf(Arr({Bulk("9-0")})));
  result.failure = Status(StatusCode::kTimeout, "redis command timed out");
  settlement_.Apply(*plan, result, now());
  EXPECT_FALSE(ledger_.Holds("9-0")) << "the answered keepalive was applied";
  EXPECT_FALSE(ledger_.Holds("1-0"));
  EXPECT_FALSE(ledger_.Holds("7-0"));
  EXPECT_FALSE(ledger_.Holds("4-0"));
  EXPECT_EQ(Failures(SettleClass::kAmbiguous), 3);
  EXPECT_EQ(Failures(SettleClass::kLostLease), 1);
  EXPECT_EQ(Acked(), 0);
  EXPECT_EQ(Logged({"settlement ambiguous: the connection failed after sending; entries released, "
                    "the pending list will bring back what was not applied",
                    "\"class\":\"ambiguous\"", "\"entries\":3", "redis command timed out"}),
            1u);
  EXPECT_TRUE(settlement_.TakeRecoveryRequest());
  EXPECT_FALSE(settlement_.TakeRecoveryRequest());
  EXPECT_TRUE(settlement_.Idle());
}

// SPEC 3.5 through an ambiguous retry claim: the entry is released, but a later entry with its
// ordering key stays blocked until the recovery brings the retried one back.
TEST_F(SettlementTest, AnAmbiguousRetryClaimKeepsItsKeyBlocked) {
  EntryLedger keyed(100, "account");
  Settlement settlement(sub_, ops_, &keyed, &observer_, clock_);
  StreamEntry first = Entry("1-0");
  first.fields.push_back({"account", "A"});
  StreamEntry second = Entry("2-0");
  second.fields.push_back({"account", "A"});
  ASSERT_EQ(keyed.Admit({first, second}), 2u);
  auto out = keyed.TakeReady(10, now());
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(keyed.ScheduleRetry(out[0], now()), EntryLedger::Applied::kApplied);
  auto plan = settlement.TakeDue(now());
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(IdsOf(*plan, Step::kRetryClaim), (std::vector<std::string>{"1-0"}));
  redis::BatchResult result;
  result.failure = Status(StatusCode::kTimeout, "redis command timed out");
  settlement.Apply(*plan, result, now());
  EXPECT_FALSE(keyed.Holds("1-0"));
  EXPECT_TRUE(settlement.TakeRecoveryRequest());
  EXPECT_TRUE(keyed.TakeReady(10, now()).empty()) << "2-0 overtook the retry of 1-0";
  ASSERT_EQ(keyed.Admit({first}), 1u);  // the recovery re-read
  auto again = keyed.TakeReady(10, now());
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].id, "1-0");
}

// Nothing reached Redis (the connection was down): nothing is released or counted; the work is
// sent again once the connection is back, not in a busy loop meanwhile.
TEST_F(SettlementTest, APlanNeverWrittenIsKeptUnclassed) {
  Accepted("1-0");
  settlement_.QueueAck("1-0", true);
  DeadLettering("7-0");
  settlement_.QueueDeadLetter("7-0", Meta("rejected"));
  WaitingRetry("4-0", now());
  ASSERT_EQ(ledger_.Admit({Entry("9-0")}), 1u);
  clock_.Advance(Millis(200));
  auto plan = settlement_.TakeDue(now());
  ASSERT_TRUE(plan.has_value());
  redis::BatchResult result;
  result.written = false;
  result.failure = Status(StatusCode::kIo, "redis unreachable");
  settlement_.Apply(*plan, result, now());
  for (auto c : {SettleClass::kLostLease, SettleClass::kDefinite, SettleClass::kAmbiguous}) {
    EXPECT_EQ(Failures(c), 0) << Name(c);
  }
  EXPECT_FALSE(settlement_.TakeRecoveryRequest());
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kAcking);
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLettering);
  EXPECT_EQ(ledger_.StateOf("4-0"), EntryState::kWaitingRetry);
  EXPECT_EQ(settlement_.queued_acks(), 1u);
  EXPECT_EQ(settlement_.queued_dead_letters(), 1u);
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "no busy loop while the link is down";
  settlement_.OnConnectionReady();
  SettlePlan again = RoundTrip();
  EXPECT_EQ(Steps(again), Steps(*plan));
  auto kept_alive = IdsOf(again, Step::kKeepAlive);
  std::sort(kept_alive.begin(), kept_alive.end());
  EXPECT_EQ(kept_alive, (std::vector<std::string>{"4-0", "7-0", "9-0"}));
  EXPECT_FALSE(ledger_.Holds("1-0"));
  EXPECT_FALSE(ledger_.Holds("7-0"));
  EXPECT_EQ(ledger_.StateOf("4-0"), EntryState::kQueued);
}

TEST_F(SettlementTest, NotWrittenIsTriedAgainAfterABackoffWithoutReady) {
  Accepted("1-0");
  settlement_.QueueAck("1-0", true);
  auto plan = settlement_.TakeDue(now());
  ASSERT_TRUE(plan.has_value());
  redis::BatchResult result;
  result.written = false;
  result.failure = Status(StatusCode::kIo, "redis unreachable");
  settlement_.Apply(*plan, result, now());
  auto due = settlement_.NextDue(now());
  ASSERT_TRUE(due.has_value());
  EXPECT_GE(*due, now() + Millis(50));
  clock_.Advance(Millis(100));
  EXPECT_EQ(IdsOf(RoundTrip(), Step::kAck), (std::vector<std::string>{"1-0"}));
}

// NOSCRIPT (Redis restarted, SCRIPT FLUSH): not counted; the next plan loads the scripts first,
// at once.
TEST_F(SettlementTest, NoScriptLoadsTheScriptsAndRetriesAtOnce) {
  DeadLettering("7-0");
  settlement_.QueueDeadLetter("7-0", Meta("rejected"));
  RoundTrip([](const SettlePlan::Span&) {
    return std::vector<std::string>{Err("NOSCRIPT No matching script. Please use EVAL.")};
  });
  EXPECT_EQ(Failures(SettleClass::kDefinite), 0);
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLettering);
  SettlePlan again = RoundTrip();
  EXPECT_EQ(Steps(again), (std::vector<Step>{Step::kLoadScripts, Step::kDeadLetter}));
  EXPECT_FALSE(ledger_.Holds("7-0"));
  // Loaded: later plans carry no SCRIPT LOAD.
  DeadLettering("8-0");
  settlement_.QueueDeadLetter("8-0", Meta("rejected"));
  EXPECT_EQ(Steps(RoundTrip()), (std::vector<Step>{Step::kDeadLetter}));
}

// A shard's acknowledgements are scripts (the fenced ack): after a SCRIPT FLUSH they come back
// NOSCRIPT. They stay queued and go again at once behind the SCRIPT LOAD; they used to be dropped
// from the queue, leaving the entries held and pending for good.
TEST_F(SettlementTest, AShardsAckAnsweredNoScriptIsSentAgainAfterTheLoad) {
  sharding::FencedShardOps fenced("orders:{0}", "billing", "c1", /*token=*/7, "m1", 1);
  Settlement settlement(sub_, fenced, &ledger_, &observer_, clock_);
  Accepted("1-0");
  settlement.QueueAck("1-0", /*delivered=*/true);
  auto plan = settlement.TakeDue(now());
  ASSERT_TRUE(plan.has_value());
  settlement.Apply(*plan,
                   Answered(*plan,
                            [](const SettlePlan::Span&) {
                              return std::vector<std::string>{
                                  Err("NOSCRIPT No matching script. Please use EVAL.")};
                            }),
                   now());
  EXPECT_EQ(Failures(SettleClass::kDefinite), 0);
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kAcking);
  auto again = settlement.TakeDue(now());
  ASSERT_TRUE(again.has_value()) << "due at once";
  EXPECT_EQ(Steps(*again), (std::vector<Step>{Step::kLoadScripts, Step::kAck}));
  EXPECT_EQ(IdsOf(*again, Step::kAck), (std::vector<std::string>{"1-0"}));
  settlement.Apply(*again, Answered(*again, Success), now());
  EXPECT_FALSE(ledger_.Holds("1-0"));
  EXPECT_TRUE(settlement.Idle());
}

// A NOSCRIPT although the plan loaded the scripts (the load was refused) backs off instead of
// spinning.
TEST_F(SettlementTest, NoScriptAfterAFailedLoadBacksOff) {
  DeadLettering("7-0");
  settlement_.QueueDeadLetter("7-0", Meta("rejected"));
  const std::string noscript = Err("NOSCRIPT No matching script. Please use EVAL.");
  RoundTrip([&](const SettlePlan::Span&) { return std::vector<std::string>{noscript}; });
  auto plan = settlement_.TakeDue(now());
  ASSERT_TRUE(plan.has_value());
  ASSERT_TRUE(plan->loads_scripts());
  redis::BatchResult result;
  for (size_t i = 0; i < redis::SettleScripts().size(); ++i) {
    result.replies.push_back(ReplyOf(Err("NOPERM no permissions to run 'script|load'")));
  }
  result.replies.push_back(ReplyOf(noscript));
  settlement_.Apply(*plan, result, now());
  EXPECT_EQ(Logged({"cannot load scripts into Redis", "NOPERM"}), 1u);
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value());
  clock_.Advance(Millis(100));
  auto next = settlement_.TakeDue(now());
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(next->loads_scripts());
}

// SPEC 4.3: NOGROUP re-creates the group first.
TEST_F(SettlementTest, NoGroupAsksForTheGroupAgain) {
  Accepted("1-0");
  settlement_.QueueAck("1-0", true);
  EXPECT_FALSE(settlement_.TakeGroupMissing());
  RoundTrip([](const SettlePlan::Span&) {
    return std::vector<std::string>{Err("NOGROUP No such key 'orders' or consumer group")};
  });
  EXPECT_TRUE(settlement_.TakeGroupMissing());
  EXPECT_FALSE(settlement_.TakeGroupMissing());
  EXPECT_EQ(Failures(SettleClass::kDefinite), 1);
}

TEST_F(SettlementTest, UndoTakesBackTheReadsOfEntriesNeverPosted) {
  EXPECT_FALSE(settlement_.UndoPlan().has_value());
  ASSERT_EQ(ledger_.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")}), 3u);
  auto refs = ledger_.TakeReady(1, now());  // 1-0 is POSTed
  ASSERT_EQ(refs.size(), 1u);
  auto plan = settlement_.UndoPlan();
  ASSERT_TRUE(plan.has_value());
  auto ids = IdsOf(*plan, Step::kUndoReads);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"2-0", "3-0"}));
  EXPECT_EQ(ArgsOf(plan->commands[0])[1], redis::UndoReadsScript().sha());
  settlement_.ApplyUndo(*plan, Answered(*plan, [](const SettlePlan::Span&) {
    return std::vector<std::string>{Int(2)};
  }));
  EXPECT_EQ(
      Logged({"subscription stopped: entries read but never delivered keep their delivery count",
              "\"entries\":2"}),
      1u);
  EXPECT_EQ(Logged({"subscription stopped: cannot take back"}), 0u);
}

TEST_F(SettlementTest, AnUndoThatFailsSaysSo) {
  ASSERT_EQ(ledger_.Admit({Entry("1-0")}), 1u);
  auto plan = settlement_.UndoPlan();
  ASSERT_TRUE(plan.has_value());
  redis::BatchResult result;
  result.failure = Status(StatusCode::kTimeout, "redis command timed out");
  settlement_.ApplyUndo(*plan, result);
  EXPECT_EQ(
      Logged(
          {"subscription stopped: cannot take back the delivery count of entries never delivered",
           "redis command timed out"}),
      1u);
  EXPECT_EQ(
      Logged({"subscription stopped: entries read but never delivered keep their delivery count",
              "\"entries\":0"}),
      1u);
  clock_.Advance(Millis(1001));  // past the log's repeat limit
  result.written = false;
  result.failure = Status(StatusCode::kIo, "redis unreachable");
  settlement_.ApplyUndo(*plan, result);
  EXPECT_EQ(Logged({"subscription stopped: cannot take back", "redis unreachable"}), 1u);
  EXPECT_EQ(Logged({"subscription stopped: entries read but never delivered"}), 1u)
      << "nothing was sent: no count to report";
}

TEST_F(SettlementTest, OutcomesMoveTheEntryAndQueueItsSettlement) {
  ASSERT_EQ(ledger_.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0", 3)}), 3u);
  auto refs = ledger_.TakeReady(3, now());
  ASSERT_EQ(refs.size(), 3u);
  delivery::Decision ack;
  delivery::Decision retry{delivery::Action::kRetry, Millis(1500)};
  delivery::Decision dead{delivery::Action::kDeadLetter, Millis(0),
                          delivery::DeadLetterReason::kRejected, "422", "bad input"};
  settlement_.OnOutcome(refs[0], ack, now());
  settlement_.OnOutcome(refs[1], retry, now());
  settlement_.OnOutcome(refs[2], dead, now());
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kAcking);
  EXPECT_EQ(ledger_.StateOf("2-0"), EntryState::kWaitingRetry);
  EXPECT_EQ(ledger_.NextRetryAt(), now() + Millis(1500));
  EXPECT_EQ(ledger_.StateOf("3-0"), EntryState::kDeadLettering);
  EXPECT_EQ(settlement_.queued_acks(), 1u);
  EXPECT_EQ(settlement_.queued_dead_letters(), 1u);
  SettlePlan plan = RoundTrip();
  EXPECT_EQ(IdsOf(plan, Step::kAck), (std::vector<std::string>{"1-0"}));
  ASSERT_EQ(IdsOf(plan, Step::kDeadLetter), (std::vector<std::string>{"3-0"}));
  const auto& meta = plan.spans.back().meta;
  EXPECT_EQ(meta.reason, "rejected");
  EXPECT_EQ(meta.status, "422");
  EXPECT_EQ(meta.error, "bad input");
  EXPECT_EQ(meta.attempts, 3);
  EXPECT_EQ(meta.time_ms, kNowMs);
}

// SPEC 3.2: an entry a peer reclaimed while it was in flight keeps only a 2xx.
TEST_F(SettlementTest, ALostEntryKeepsOnlyA2xx) {
  ASSERT_EQ(ledger_.Admit({Entry("1-0"), Entry("2-0")}), 2u);
  auto refs = ledger_.TakeReady(2, now());
  ASSERT_EQ(refs.size(), 2u);
  ASSERT_EQ(ledger_.MarkLost("1-0"), EntryLedger::LostResult::kDropped);
  ASSERT_EQ(ledger_.MarkLost("2-0"), EntryLedger::LostResult::kDropped);
  settlement_.OnOutcome(refs[0], delivery::Decision{}, now());
  settlement_.OnOutcome(refs[1], delivery::Decision{delivery::Action::kRetry, Millis(10)}, now());
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kAcking);
  EXPECT_EQ(settlement_.queued_acks(), 1u);
  EXPECT_FALSE(ledger_.Holds("2-0"));
  EXPECT_EQ(Logged({"result dropped: the entry was reclaimed by another consumer (lost lease)",
                    "\"id\":\"2-0\""}),
            1u);
}

TEST_F(SettlementTest, AQueuedDeadLetterWithoutATimeGetsTheClocks) {
  DeadLettering("7-0");
  redis::DeadLetterMeta meta = Meta("dropped");
  meta.time_ms = 0;
  settlement_.QueueDeadLetter("7-0", meta);
  SettlePlan plan = RoundTrip();
  ASSERT_EQ(plan.spans.size(), 1u);
  EXPECT_EQ(plan.spans[0].meta.time_ms, kNowMs);
}

TEST_F(SettlementTest, WhatStaysUnsettledAtShutdownIsLogged) {
  settlement_.LogUnsettled();
  EXPECT_EQ(Logged({"subscription stopped: outcomes not settled in time"}), 0u)
      << "idle: nothing to say";
  Accepted("1-0");
  settlement_.QueueAck("1-0", true);
  DeadLettering("7-0");
  settlement_.QueueDeadLetter("7-0", Meta("rejected"));
  settlement_.LogUnsettled();
  EXPECT_EQ(Logged({"subscription stopped: outcomes not settled in time stay pending for a restart "
                    "or a peer",
                    "\"acks\":1", "\"dead_letters\":1"}),
            1u);
}

TEST_F(SettlementTest, WithoutMetricsNothingIsCounted) {
  AttemptObserver no_one;  // watches nothing
  Settlement settlement(sub_, ops_, &ledger_, &no_one, clock_);
  Accepted("1-0");
  settlement.QueueAck("1-0", true);
  auto plan = settlement.TakeDue(now());
  ASSERT_TRUE(plan.has_value());
  settlement.Apply(
      *plan,
      Answered(*plan, [](const SettlePlan::Span&) { return std::vector<std::string>{Err("OOM")}; }),
      now());
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kAcking);
}

// --- Two-step dead letters (SPEC 8: the dead-letter stream in another slot) ---------------------

class TwoStepSettlementTest : public SettlementTest {
 protected:
  TwoStepSettlementTest() { settlement_.UseTwoStepDeadLetters(/*cluster_map=*/true); }

  std::optional<SettlePlan> TakeWrites() {
    return settlement_.TakeDeadLetterWrites(now(), map_replicas_);
  }
  // Takes the plan for the dead-letter stream's connection, answers it, applies it.
  SettlePlan WriteRoundTrip(const Answer& answer = Success) {
    auto plan = TakeWrites();
    EXPECT_TRUE(plan.has_value());
    if (!plan) return {};
    settlement_.ApplyDeadLetterWrites(*plan, Answered(*plan, answer), now(), map_replicas_);
    return *plan;
  }
  // An answer that differs from Success in one step.
  static Answer Except(Step step, std::vector<std::string> replies) {
    return [step, replies](const SettlePlan::Span& span) {
      return span.step == step ? replies : Success(span);
    };
  }
  // An answer whose WAIT says `acked` replicas have the writes and whose ROLE lists `connected`.
  static Answer Replicas(int acked, int connected);
  // The entry `id` queued and checked (step 1): next, its write.
  void Checked(const std::string& id = "7-0") {
    DeadLettering(id);
    settlement_.QueueDeadLetter(id, Meta("rejected"));
    ASSERT_EQ(Steps(RoundTrip()), (std::vector<Step>{Step::kDeadLetterCheck}));
  }

  // The live replicas the cluster map lists for the dead-letter stream's master.
  std::optional<int> map_replicas_ = 0;
};

// The ROLE answer of a master with `n` replicas connected.
std::string RoleOfMaster(int n) {
  std::vector<std::string> replicas;
  for (int i = 0; i < n; ++i) {
    replicas.push_back(Arr({Bulk("10.0.0." + std::to_string(i + 2)), Bulk("6379"), Bulk("9")}));
  }
  return Arr({Bulk("master"), Int(9), Arr(replicas)});
}

Answer TwoStepSettlementTest::Replicas(int acked, int connected) {
  return [acked, connected](const SettlePlan::Span& span) {
    if (span.step == Step::kReplicaWait) return std::vector<std::string>{Int(acked)};
    if (span.step == Step::kReplicaProbe) return std::vector<std::string>{RoleOfMaster(connected)};
    return Success(span);
  };
}

TEST_F(TwoStepSettlementTest, CheckedThenWrittenThenAcknowledgedCountedAsTheOneStepPath) {
  DeadLettering("7-0");
  redis::DeadLetterMeta meta = Meta("rejected");
  meta.attempts = 2;
  settlement_.QueueDeadLetter("7-0", meta);
  // (1) on the stream's connection: is it still ours?
  SettlePlan check = RoundTrip();
  ASSERT_EQ(Steps(check), (std::vector<Step>{Step::kDeadLetterCheck}));
  EXPECT_EQ(ArgsOf(check.commands[0]),
            (std::vector<std::string>{"XPENDING", "orders", "billing", "7-0", "7-0", "1", "c1"}));
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "nothing for the stream's connection";
  EXPECT_FALSE(settlement_.Idle());
  // (2) on the dead-letter stream's connection: the XADD, then ROLE (still a master?).
  SettlePlan write = WriteRoundTrip();
  ASSERT_EQ(Steps(write), (std::vector<Step>{Step::kDeadLetterWrite, Step::kReplicaProbe}))
      << "no WAIT: the map lists no replica";
  EXPECT_EQ(ArgsOf(write.commands[1]), (std::vector<std::string>{"ROLE"}));
  StreamEntry entry = Entry("7-0");
  redis::Command expected("XADD");
  expected.Arg("orders:dlq").Arg("*");
  redis::AppendDeadLetterFields("orders", "billing", entry, meta, &expected);
  EXPECT_EQ(ArgsOf(write.commands[0]), ArgsOf(expected)) << "the one-step script's record";
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLetterWritten);
  EXPECT_EQ(Rejected(), 0) << "counted once acknowledged";
  // (3) on the stream's connection: acknowledged only if still ours.
  SettlePlan ack = RoundTrip();
  ASSERT_EQ(Steps(ack), (std::vector<Step>{Step::kDeadLetterAck}));
  EXPECT_EQ(ArgsOf(ack.commands[0]),
            (std::vector<std::string>{"EVALSHA", redis::OwnedAckScript().sha(), "1", "orders",
                                      "billing", "c1", "7-0", "ack"}));
  EXPECT_FALSE(ledger_.Holds("7-0"));
  EXPECT_EQ(Rejected(), 1);
  EXPECT_EQ(Acked(), 1);
  EXPECT_EQ(Failures(SettleClass::kDefinite) + Failures(SettleClass::kAmbiguous) +
                Failures(SettleClass::kLostLease),
            0);
  EXPECT_EQ(Logged({"\"msg\":\"entry dead-lettered\"", "\"id\":\"7-0\"", "\"reason\":\"rejected\"",
                    "\"attempts\":2", "\"status\":\"422\""}),
            1u);
  EXPECT_TRUE(settlement_.Idle());
}

TEST_F(TwoStepSettlementTest, TheAckModeShapesTheOwnedAcknowledgement) {
  settlement_.SetAckMode(redis::AckMode::kAckDel);
  Checked();
  WriteRoundTrip();
  SettlePlan ack = RoundTrip();
  ASSERT_EQ(Steps(ack), (std::vector<Step>{Step::kDeadLetterAck}));
  EXPECT_EQ(ArgsOf(ack.commands[0]).back(), "ackdel");
}

TEST_F(TwoStepSettlementTest, ARefusedAcknowledgementRepeatsOnlyTheAcknowledgement) {
  Checked();
  WriteRoundTrip();
  RoundTrip(Except(Step::kDeadLetterAck, {Err("READONLY You can't write against a replica")}));
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLetterWritten);
  EXPECT_EQ(Failures(SettleClass::kDefinite), 1);
  EXPECT_EQ(Logged({"cannot write dead letter; the entry stays pending and is tried again",
                    "\"class\":\"definite\"", "READONLY"}),
            1u);
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "backing off";
  EXPECT_FALSE(TakeWrites().has_value()) << "never a second XADD";
  clock_.Advance(Millis(100));
  SettlePlan again = RoundTrip();
  EXPECT_EQ(Steps(again), (std::vector<Step>{Step::kDeadLetterAck}));
  EXPECT_FALSE(TakeWrites().has_value()) << "never a second XADD";
  EXPECT_FALSE(ledger_.Holds("7-0"));
  EXPECT_EQ(Rejected(), 1);
  EXPECT_TRUE(settlement_.Idle());
}

TEST_F(TwoStepSettlementTest, AnAcknowledgementNeverWrittenIsSentAgainAlone) {
  Checked();
  WriteRoundTrip();
  auto plan = settlement_.TakeDue(now());
  ASSERT_TRUE(plan.has_value());
  redis::BatchResult down;
  down.written = false;
  down.failure = Status(StatusCode::kIo, "not connected to Redis");
  settlement_.Apply(*plan, down, now());
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLetterWritten);
  settlement_.OnConnectionReady();
  EXPECT_EQ(Steps(RoundTrip()), (std::vector<Step>{Step::kDeadLetterAck}));
  EXPECT_FALSE(ledger_.Holds("7-0"));
}

TEST_F(TwoStepSettlementTest, ARefusedWriteIsCheckedAgainThenWritten) {
  Checked();
  WriteRoundTrip(Except(Step::kDeadLetterWrite, {Err("OOM command not allowed")}));
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLettering);
  EXPECT_EQ(Failures(SettleClass::kDefinite), 1);
  EXPECT_EQ(Logged({"cannot write dead letter; the entry stays pending and is tried again",
                    "\"class\":\"definite\"", "\"dead_letter_stream\":\"orders:dlq\"", "OOM"}),
            1u);
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "backing off";
  clock_.Advance(Millis(100));
  EXPECT_EQ(Steps(RoundTrip()), (std::vector<Step>{Step::kDeadLetterCheck}));
  EXPECT_EQ(Steps(WriteRoundTrip()),
            (std::vector<Step>{Step::kDeadLetterWrite, Step::kReplicaProbe}));
  EXPECT_EQ(Steps(RoundTrip()), (std::vector<Step>{Step::kDeadLetterAck}));
  EXPECT_EQ(Rejected(), 1);
}

// A write sent without an answer may have landed: released (the pending list brings the entry
// back: a second letter at worst), never held back as if it had not.
TEST_F(TwoStepSettlementTest, AWriteWithoutAnAnswerIsAmbiguous) {
  Checked();
  auto plan = TakeWrites();
  ASSERT_TRUE(plan.has_value());
  redis::BatchResult lost;
  lost.failure = Status(StatusCode::kIo, "connection reset by peer");
  settlement_.ApplyDeadLetterWrites(*plan, lost, now(), map_replicas_);
  EXPECT_FALSE(ledger_.Holds("7-0"));
  EXPECT_EQ(Failures(SettleClass::kAmbiguous), 1);
  EXPECT_TRUE(settlement_.TakeRecoveryRequest());
  EXPECT_EQ(Logged({"settlement ambiguous", "\"class\":\"ambiguous\"", "connection reset"}), 1u);
  EXPECT_EQ(Rejected(), 0);
  EXPECT_TRUE(settlement_.Idle());
}

TEST_F(TwoStepSettlementTest, AWriteNeverSentIsSentAgainWithoutAnotherCheck) {
  Checked();
  auto plan = TakeWrites();
  ASSERT_TRUE(plan.has_value());
  redis::BatchResult down;
  down.written = false;
  down.failure = Status(StatusCode::kIo, "not connected to Redis");
  settlement_.ApplyDeadLetterWrites(*plan, down, now(), map_replicas_);
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLettering);
  EXPECT_EQ(Failures(SettleClass::kAmbiguous) + Failures(SettleClass::kDefinite), 0);
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value());
  EXPECT_FALSE(TakeWrites().has_value()) << "not until the connection is back";
  settlement_.OnDeadLetterConnectionReady();
  EXPECT_EQ(Steps(WriteRoundTrip()),
            (std::vector<Step>{Step::kDeadLetterWrite, Step::kReplicaProbe}));
}

TEST_F(TwoStepSettlementTest, ACheckThatFindsAPeerWritesNothing) {
  DeadLettering("7-0");
  settlement_.QueueDeadLetter("7-0", Meta("rejected"));
  RoundTrip(Except(Step::kDeadLetterCheck, {Arr({})}));
  EXPECT_FALSE(ledger_.Holds("7-0"));
  EXPECT_FALSE(TakeWrites().has_value());
  EXPECT_EQ(Failures(SettleClass::kLostLease), 1);
  EXPECT_EQ(Logged({"dead letter not written: the entry is no longer this consumer's (lost lease)",
                    "\"class\":\"lost_lease\"", "\"id\":\"7-0\""}),
            1u);
  EXPECT_TRUE(settlement_.Idle());
}

TEST_F(TwoStepSettlementTest, AnAcknowledgementThatFindsAPeerIsALostLease) {
  Checked();
  WriteRoundTrip();
  RoundTrip(Except(Step::kDeadLetterAck, {Int(0)}));
  EXPECT_FALSE(ledger_.Holds("7-0"));
  EXPECT_EQ(Failures(SettleClass::kLostLease), 1);
  EXPECT_EQ(Rejected(), 0);
  EXPECT_EQ(Acked(), 0);
  EXPECT_EQ(Logged({"dead letter written for an entry a peer now holds", "\"class\":\"lost_lease\"",
                    "\"id\":\"7-0\""}),
            1u);
  EXPECT_TRUE(settlement_.Idle());
}

// Review finding: whether a letter waits for a replica is decided by the cluster map (or the last
// ROLE), never by a stale ROLE answer of none alone.
TEST_F(TwoStepSettlementTest, WritesWaitForAReplicaWhenTheMapOrRoleListsOne) {
  map_replicas_ = 1;
  Checked("1-0");
  SettlePlan write = WriteRoundTrip(Replicas(1, 0));
  ASSERT_EQ(Steps(write),
            (std::vector<Step>{Step::kDeadLetterWrite, Step::kReplicaWait, Step::kReplicaProbe}))
      << "the map lists a replica: WAIT, although this connection's ROLE was never asked";
  EXPECT_EQ(ArgsOf(write.commands[1]), (std::vector<std::string>{"WAIT", "1", "1000"}));
  EXPECT_EQ(Steps(RoundTrip()), (std::vector<Step>{Step::kDeadLetterAck}))
      << "a replica has the letter: the original is acknowledged";

  // The last ROLE said none connected (perhaps a moment's resync), the map lists one: WAIT.
  Checked("2-0");
  EXPECT_TRUE(WriteRoundTrip(Replicas(1, 0)).Has(Step::kReplicaWait))
      << "a ROLE of none alone never skips the WAIT";
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));

  // The map lists none, and ROLE (just answered: none) agrees: no WAIT.
  map_replicas_ = 0;
  Checked("3-0");
  EXPECT_FALSE(WriteRoundTrip().Has(Step::kReplicaWait));
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));

  // The map not yet caught up with a replica ROLE lists: held, and WAIT asked at once.
  Checked("4-0");
  EXPECT_FALSE(WriteRoundTrip(Replicas(0, 1)).Has(Step::kReplicaWait));
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value())
      << "written without WAIT while ROLE listed a replica: held, not acknowledged";
  ASSERT_TRUE(settlement_.DeadLetterWritesDueAt().has_value());
  EXPECT_LE(*settlement_.DeadLetterWritesDueAt(), now()) << "due now, no backoff";
  EXPECT_EQ(Steps(WriteRoundTrip(Replicas(1, 1))),
            (std::vector<Step>{Step::kReplicaWait, Step::kReplicaProbe}));
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));
  Checked("5-0");
  EXPECT_TRUE(WriteRoundTrip(Replicas(1, 1)).Has(Step::kReplicaWait)) << "ROLE's last answer";
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));
  EXPECT_TRUE(settlement_.Idle());
}

// Review finding: the map cannot say for the connection's node when that node is a master
// learned from a -MOVED (typically a replica just promoted) or no longer the slot's master in the
// map (it failed over under the connection): WAIT, and a 0 holds the letters, whatever ROLE says.
TEST_F(TwoStepSettlementTest, AMapThatCannotSayForTheNodeHoldsTheLetters) {
  map_replicas_.reset();
  Checked();
  SettlePlan write = WriteRoundTrip(Replicas(0, 0));
  EXPECT_TRUE(write.Has(Step::kReplicaWait));
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "held, although ROLE lists none";
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLetterWritten);
  EXPECT_EQ(Logged({"the original stays pending until one does", "\"replicas_listed\":-1"}), 1u);
  // The map read again: that node has a replica, which confirms.
  map_replicas_ = 1;
  clock_.Advance(Millis(100));
  EXPECT_EQ(Steps(WriteRoundTrip(Replicas(1, 1))),
            (std::vector<Step>{Step::kReplicaWait, Step::kReplicaProbe}));
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));
  EXPECT_TRUE(settlement_.Idle());
}

// Review finding: acknowledging after WAIT said 0 would lose the letter to a failover of the
// dead-letter stream's master (its replica never had it) while the acknowledgement stays.
TEST_F(TwoStepSettlementTest, ALetterNoListedReplicaConfirmedIsHeldUntilOneDoes) {
  map_replicas_ = 1;
  Checked();
  WriteRoundTrip(Replicas(0, 1));
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLetterWritten);
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "not acknowledged";
  EXPECT_FALSE(settlement_.Idle());
  EXPECT_EQ(Logged({"no replica confirmed it within 1 s, the original stays pending until one does",
                    "\"dead_letter_stream\":\"orders:dlq\"", "\"replicas_listed\":1"}),
            1u);
  ASSERT_TRUE(settlement_.DeadLetterWritesDueAt().has_value());
  EXPECT_GT(*settlement_.DeadLetterWritesDueAt(), now()) << "asked again after a backoff";
  EXPECT_FALSE(TakeWrites().has_value());
  clock_.Advance(Millis(100));
  // Asked again: WAIT alone (it covers the connection's earlier writes), never a second XADD.
  EXPECT_EQ(Steps(WriteRoundTrip(Replicas(0, 1))),
            (std::vector<Step>{Step::kReplicaWait, Step::kReplicaProbe}));
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value());
  EXPECT_EQ(Logged({"the original stays pending until one does"}), 1u) << "not every round";
  // Held for long: said again every kHeldWarnEvery.
  clock_.Advance(Settlement::kHeldWarnEvery);
  WriteRoundTrip(Replicas(0, 1));
  EXPECT_EQ(Logged({"dead letters still held: no replica has confirmed them", "\"entries\":1"}),
            1u);
  clock_.Advance(Millis(5000));
  SettlePlan confirm = WriteRoundTrip(Replicas(1, 1));
  EXPECT_EQ(Steps(confirm), (std::vector<Step>{Step::kReplicaWait, Step::kReplicaProbe}));
  EXPECT_FALSE(settlement_.DeadLetterWritesDueAt().has_value());
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));
  EXPECT_FALSE(ledger_.Holds("7-0"));
  EXPECT_EQ(Rejected(), 1);
  EXPECT_TRUE(settlement_.Idle());
}

TEST_F(TwoStepSettlementTest, AHeldLetterIsWrittenAgainWhenItsConnectionIsLost) {
  map_replicas_ = 1;
  Checked();
  WriteRoundTrip(Replicas(0, 1));
  ASSERT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLetterWritten);
  // Reconnected, perhaps to a promoted replica that never had the letter.
  settlement_.OnDeadLetterConnectionReady();
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLettering);
  EXPECT_EQ(
      Logged({"dead letters no replica confirmed before their connection was lost are written "
              "again",
              "\"entries\":1"}),
      1u);
  map_replicas_ = 0;
  EXPECT_EQ(Steps(WriteRoundTrip()),
            (std::vector<Step>{Step::kDeadLetterWrite, Step::kReplicaProbe}))
      << "written again (no replica listed now: no WAIT)";
  EXPECT_EQ(Steps(RoundTrip()), (std::vector<Step>{Step::kDeadLetterAck}));
  EXPECT_EQ(Rejected(), 1);
  EXPECT_TRUE(settlement_.Idle());
}

// Review finding: a replica gone from ROLE may be the one a partition promotes, and this master
// rejoin as its replica without the letter: a held letter stays held while the cluster map still
// lists a live replica.
TEST_F(TwoStepSettlementTest, AHeldLetterStaysHeldWhileTheMapListsAReplica) {
  map_replicas_ = 1;
  Checked();
  WriteRoundTrip(Replicas(0, 0));
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "not acknowledged";
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLetterWritten);
  clock_.Advance(Millis(100));
  EXPECT_EQ(Steps(WriteRoundTrip(Replicas(0, 0))),
            (std::vector<Step>{Step::kReplicaWait, Step::kReplicaProbe}))
      << "WAIT asked although ROLE lists no replica: the map does";
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "still held";
  clock_.Advance(Millis(300));
  EXPECT_TRUE(WriteRoundTrip(Replicas(1, 1)).Has(Step::kReplicaWait));
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck)) << "a replica confirmed (WAIT 1)";
  EXPECT_TRUE(settlement_.Idle());
}

// Review finding: a replica lost for good (the map marks it failed, ROLE lists none) would hold
// letters for ever, filling intake and stalling a shutdown to its deadline.
TEST_F(TwoStepSettlementTest, HeldLettersAreAcknowledgedOnceNoReplicaIsListedAnyMore) {
  map_replicas_ = 1;
  Checked();
  WriteRoundTrip(Replicas(0, 0));
  ASSERT_FALSE(settlement_.TakeDue(now()).has_value());
  map_replicas_ = 0;  // the replica failed for good
  clock_.Advance(Millis(100));
  EXPECT_EQ(Steps(WriteRoundTrip(Replicas(0, 0))),
            (std::vector<Step>{Step::kReplicaWait, Step::kReplicaProbe}));
  EXPECT_EQ(Logged({"the dead-letter stream's master has no replica to confirm it, the original "
                    "is acknowledged",
                    "\"entries\":1"}),
            1u);
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));
  EXPECT_FALSE(ledger_.Holds("7-0"));
  EXPECT_TRUE(settlement_.Idle());
}

// The ROLE or WAIT answers of a node demoted under the connection (a failover): what it has not
// passed on is dropped when it resyncs, so held letters and this plan's are written again, on the
// new master the connection is asked to follow.
TEST_F(TwoStepSettlementTest, ADemotedMasterHasItsLettersWrittenAgainOnTheNewMaster) {
  const std::vector<std::pair<std::string, Answer>> demotions = {
      {"ROLE says slave",
       [](const SettlePlan::Span& span) {
         if (span.step == Step::kReplicaWait) return std::vector<std::string>{Int(0)};
         if (span.step == Step::kReplicaProbe) {
           return std::vector<std::string>{
               Arr({Bulk("slave"), Bulk("10.0.0.2"), Int(6379), Bulk("connected"), Int(9)})};
         }
         return Success(span);
       }},
      {"WAIT unblocked",
       Except(Step::kReplicaWait,
              {Err("UNBLOCKED force unblock from blocking operation, instance state changed "
                   "(master -> replica?)")})},
      {"WAIT on a replica",
       Except(Step::kReplicaWait, {Err("ERR WAIT cannot be used with replica instances. Please "
                                       "also note that since Redis 4.0 if a replica is "
                                       "configured to be writable (which is not the default) "
                                       "writes to replicas are just local and are not "
                                       "propagated.")})},
  };
  int id = 0;
  for (const auto& [name, demoted] : demotions) {
    SCOPED_TRACE(name);
    const std::string entry = std::to_string(++id) + "-0";
    map_replicas_ = 1;
    Checked(entry);
    settlement_.OnDeadLetterConnectionReady();  // a fresh connection
    WriteRoundTrip(demoted);
    EXPECT_EQ(ledger_.StateOf(entry), EntryState::kDeadLettering) << "to be written again";
    EXPECT_TRUE(settlement_.TakeDeadLetterMasterDemoted()) << "the connection is moved";
    EXPECT_FALSE(settlement_.TakeDeadLetterMasterDemoted()) << "once";
    EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "not acknowledged";
    EXPECT_FALSE(TakeWrites().has_value()) << "not on this node now";
    ASSERT_TRUE(settlement_.DeadLetterWritesDueAt().has_value())
        << "due after a backoff, should the connection stay where it is";
    EXPECT_GT(*settlement_.DeadLetterWritesDueAt(), now());
    // The connection follows the slot to the new master (no replica there yet).
    map_replicas_ = 0;
    settlement_.OnDeadLetterConnectionReady();
    EXPECT_EQ(Steps(WriteRoundTrip()),
              (std::vector<Step>{Step::kDeadLetterWrite, Step::kReplicaProbe}));
    EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));
    EXPECT_FALSE(ledger_.Holds(entry));
    EXPECT_TRUE(settlement_.Idle());
  }
  // Once: the same warning within a second is counted, not repeated (SPEC 6).
  EXPECT_EQ(Logged({"the dead-letter stream's master was demoted before a replica confirmed"}), 1u);
}

TEST_F(TwoStepSettlementTest, AWaitRefusedByTheAclAcknowledgesAndABusyOneIsAskedAgain) {
  map_replicas_ = 1;
  Checked();
  WriteRoundTrip(Except(Step::kReplicaWait, {Err("BUSY Redis is busy running a script")}));
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "BUSY confirms nothing";
  EXPECT_EQ(ledger_.StateOf("7-0"), EntryState::kDeadLetterWritten);
  EXPECT_FALSE(TakeWrites().has_value()) << "after a backoff";
  clock_.Advance(Millis(100));
  WriteRoundTrip(Except(Step::kReplicaWait,
                        {Err("NOPERM this user has no permissions to run the 'wait' command")}));
  EXPECT_EQ(Logged({"waiting for a replica failed, the original is acknowledged", "NOPERM"}), 1u);
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));
  EXPECT_TRUE(settlement_.Idle());
}

// Review finding: a plan of ROLE alone, answered BUSY, was sent again at once for as long as
// the server stayed busy. ROLE now only rides along with writes or a WAIT.
TEST_F(TwoStepSettlementTest, ABusyRoleIsNeverAskedAlone) {
  const std::string busy = Err("BUSY Redis is busy running a script");
  Checked("1-0");
  SettlePlan write = WriteRoundTrip(Except(Step::kReplicaProbe, {busy}));
  EXPECT_EQ(Steps(write), (std::vector<Step>{Step::kDeadLetterWrite, Step::kReplicaProbe}));
  EXPECT_FALSE(TakeWrites().has_value()) << "nothing to write or confirm: no plan";
  EXPECT_FALSE(settlement_.DeadLetterWritesDueAt().has_value());
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck)) << "the map lists no replica";

  // Held letters whose ROLE answers BUSY while WAIT answers: WAIT decides, after its backoff.
  map_replicas_ = 1;
  Checked("2-0");
  const auto wait_then_busy = [busy](int acked) -> Answer {
    return [busy, acked](const SettlePlan::Span& span) {
      if (span.step == Step::kReplicaWait) return std::vector<std::string>{Int(acked)};
      return span.step == Step::kReplicaProbe ? std::vector<std::string>{busy} : Success(span);
    };
  };
  WriteRoundTrip(wait_then_busy(0));
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "held";
  EXPECT_FALSE(TakeWrites().has_value()) << "not before the backoff: no spinning";
  clock_.Advance(Millis(100));
  EXPECT_EQ(Steps(WriteRoundTrip(wait_then_busy(1))),
            (std::vector<Step>{Step::kReplicaWait, Step::kReplicaProbe}));
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));
  EXPECT_TRUE(settlement_.Idle());
}

TEST_F(TwoStepSettlementTest, WithoutTheRightToAskForTheRoleTheMapDecides) {
  map_replicas_ = 1;
  Checked("1-0");
  WriteRoundTrip(Except(Step::kReplicaProbe, {Err("NOPERM this user has no permissions")}));
  EXPECT_EQ(Logged({"cannot ask the dead-letter stream's master for its role", "NOPERM"}), 1u);
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));
  Checked("2-0");
  SettlePlan write = WriteRoundTrip(Replicas(0, 0));
  EXPECT_EQ(Steps(write), (std::vector<Step>{Step::kDeadLetterWrite, Step::kReplicaWait}))
      << "ROLE is not asked again on this connection";
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "the map lists a replica: held";
  EXPECT_EQ(ledger_.StateOf("2-0"), EntryState::kDeadLetterWritten);
  // The map cannot say for this node: still held.
  map_replicas_.reset();
  clock_.Advance(Millis(100));
  WriteRoundTrip(Replicas(0, 0));
  EXPECT_FALSE(settlement_.TakeDue(now()).has_value()) << "held while the map cannot say";
  // The map lists none now: nothing could confirm them.
  map_replicas_ = 0;
  clock_.Advance(Millis(300));
  WriteRoundTrip(Replicas(0, 0));
  EXPECT_EQ(Logged({"has no replica to confirm it, the original is acknowledged"}), 1u);
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));
  EXPECT_TRUE(settlement_.Idle());
}

// Without a cluster map (the runtime's integration tests force two-step on a standalone server),
// ROLE alone decides; the first letter, before any ROLE answer, waits for one replica.
TEST_F(SettlementTest, TwoStepWithoutAClusterMapGoesByRole) {
  settlement_.UseTwoStepDeadLetters(/*cluster_map=*/false);
  const auto write_round_trip = [&](const Answer& answer) {
    auto plan = settlement_.TakeDeadLetterWrites(now(), std::nullopt);
    EXPECT_TRUE(plan.has_value());
    if (!plan) return SettlePlan{};
    settlement_.ApplyDeadLetterWrites(*plan, Answered(*plan, answer), now(), std::nullopt);
    return *plan;
  };
  const auto no_replica = [](const SettlePlan::Span& span) {
    return span.step == Step::kReplicaWait ? std::vector<std::string>{Int(0)} : Success(span);
  };
  DeadLettering("1-0");
  settlement_.QueueDeadLetter("1-0", Meta("rejected"));
  RoundTrip();
  EXPECT_TRUE(write_round_trip(no_replica).Has(Step::kReplicaWait)) << "nothing known yet";
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck)) << "ROLE says the master has no replica";
  DeadLettering("2-0");
  settlement_.QueueDeadLetter("2-0", Meta("rejected"));
  RoundTrip();
  EXPECT_EQ(Steps(write_round_trip(Success)),
            (std::vector<Step>{Step::kDeadLetterWrite, Step::kReplicaProbe}));
  EXPECT_TRUE(RoundTrip().Has(Step::kDeadLetterAck));
  EXPECT_TRUE(settlement_.Idle());
}

// The one-step path is untouched by the two-step machinery.
TEST_F(SettlementTest, WithoutTwoStepADeadLetterIsOneScriptAndNoWrites) {
  DeadLettering("7-0");
  settlement_.QueueDeadLetter("7-0", Meta("rejected"));
  EXPECT_EQ(Steps(RoundTrip()), (std::vector<Step>{Step::kDeadLetter}));
  EXPECT_FALSE(settlement_.TakeDeadLetterWrites(now(), 1).has_value());
}

}  // namespace
}  // namespace streamcar::runtime
