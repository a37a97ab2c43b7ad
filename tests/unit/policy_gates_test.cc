// The delivery policies of SPEC 11 as gates, on a manual clock: the token bucket
// (common/token_bucket.h), the rate limit's gate (runtime/rate_limit_gate.h), shared by shard
// loops too (runtime/shared_token_bucket.h), and the circuit breaker's state machine
// (runtime/circuit_breaker_gate.h), and what they say as the ledger's pause
// (runtime/delivery_gates.h).

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "sidecar/common/token_bucket.h"
#include "sidecar/runtime/circuit_breaker_gate.h"
#include "sidecar/runtime/delivery_gates.h"
#include "sidecar/runtime/rate_limit_gate.h"
#include "sidecar/runtime/shared_token_bucket.h"

namespace streamcar::runtime {
namespace {

using Kind = delivery::HandlerResponse::Kind;

delivery::HandlerResponse Answer(Kind kind, int status = 0, std::string body = "") {
  delivery::HandlerResponse response;
  response.kind = kind;
  response.status = status;
  response.body = std::move(body);
  return response;
}
const delivery::HandlerResponse k200 = Answer(Kind::kAnswered, 200);
const delivery::HandlerResponse k503 = Answer(Kind::kAnswered, 503);
const delivery::HandlerResponse kRefused = Answer(Kind::kRefused);

// What the gates report, in order.
class Recorder final : public AttemptObserver {
 public:
  void OnCircuitState(CircuitState state) override { states.push_back(state); }
  void OnRateLimited(double seconds) override { waited += seconds; }
  std::vector<CircuitState> states;
  double waited = 0;
};

// --- the token bucket ---------------------------------------------------------------------------

TEST(TokenBucket, StartsFullWithTheBurstThenRefillsAtTheRate) {
  ManualClock clock;
  TokenBucket bucket(/*rate=*/10, /*burst=*/3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(bucket.HasToken(clock.Now())) << i;
    bucket.Take(clock.Now());
  }
  EXPECT_FALSE(bucket.HasToken(clock.Now())) << "the burst is spent";
  EXPECT_EQ(bucket.NextTokenAt(clock.Now()), clock.Now() + Millis(100)) << "10 a second";
  clock.Advance(Millis(99));
  EXPECT_FALSE(bucket.HasToken(clock.Now()));
  clock.Advance(Millis(1));
  EXPECT_TRUE(bucket.HasToken(clock.Now())) << "the token is there when NextTokenAt said";
  clock.Advance(Millis(10'000));
  EXPECT_DOUBLE_EQ(bucket.TokensAt(clock.Now()), 3.0) << "never more than the burst";
}

TEST(TokenBucket, ATimerArmedAtNextTokenAtFindsTheTokenWhateverTheRounding) {
  ManualClock clock;
  // 3 a second: 333.33... ms a token, which no clock tick hits exactly.
  TokenBucket bucket(3, 1);
  SteadyTime now = clock.Now();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(bucket.HasToken(now)) << i;
    bucket.Take(now);
    const SteadyTime next = bucket.NextTokenAt(now);
    ASSERT_GT(next, now) << i;
    now = next;
  }
  // 1000 tokens took at least 999 intervals of a third of a second: the rate held.
  EXPECT_GE(now - clock.Now(), std::chrono::nanoseconds(332'999'999'667));
}

TEST(TokenBucket, OverAnyWindowAtMostRateTimesSecondsPlusBurst) {
  ManualClock clock;
  const double rate = 7;
  const int burst = 4;
  TokenBucket bucket(rate, burst);
  // A greedy sender that takes every token the moment it comes, for 10 s.
  std::vector<SteadyTime> sent;
  SteadyTime now = clock.Now();
  const SteadyTime end = now + Millis(10'000);
  while (now < end) {
    if (bucket.HasToken(now)) {
      bucket.Take(now);
      sent.push_back(now);
    } else {
      now = bucket.NextTokenAt(now);
    }
  }
  EXPECT_LE(sent.size(), static_cast<size_t>(rate * 10 + burst));
  EXPECT_GE(sent.size(), static_cast<size_t>(rate * 10 + burst) - 1) << "and not much fewer";
  // Any one-second window: at most rate + burst.
  for (size_t i = 0; i < sent.size(); ++i) {
    size_t in_window = 0;
    for (size_t j = i; j < sent.size() && sent[j] < sent[i] + Millis(1000); ++j) ++in_window;
    ASSERT_LE(in_window, static_cast<size_t>(rate + burst)) << i;
  }
}

TEST(TokenBucket, TokenCameAtIsWhenTheCountReachedOne) {
  ManualClock clock;
  TokenBucket bucket(4, 1);  // 250 ms a token
  EXPECT_EQ(bucket.TokenCameAt(clock.Now()), SteadyTime{}) << "full from the start";
  bucket.Take(clock.Now());
  clock.Advance(Millis(400));
  EXPECT_EQ(bucket.TokenCameAt(clock.Now()), SteadyTime{} + Millis(250));
}

// --- the rate limit's gate
// -------------------------------------------------------------------------

TEST(RateLimitGate, ClosesUntilTheNextTokenAndLetsReadingGoOn) {
  ManualClock clock;
  Recorder observer;
  RateLimitGate gate(/*max_rps=*/2, /*burst=*/2, &observer);
  gate.OnSent(clock.Now());
  EXPECT_TRUE(gate.StateAt(clock.Now()).open) << "burst 2: a second request may go";
  gate.OnSent(clock.Now());
  const GateState closed = gate.StateAt(clock.Now());
  EXPECT_FALSE(closed.open);
  ASSERT_TRUE(closed.reopens_at.has_value()) << "it reopens by itself: a timer, no busy loop";
  EXPECT_EQ(*closed.reopens_at, clock.Now() + Millis(500));
  EXPECT_EQ(closed.reads, GateState::Reads::kGoOn);

  DeliveryGates gates;
  gates.Add(std::make_unique<RateLimitGate>(2, 1, &observer));
  gates.OnSent(clock.Now());
  const EntryLedger::Pause pause = gates.PauseAt(clock.Now());
  EXPECT_EQ(pause.until, SteadyTime{}) << "reading is not paused";
  EXPECT_EQ(pause.delivery_until, clock.Now() + Millis(500)) << "delivery is, until the token";
}

TEST(RateLimitGate, CountsTheTimeReadyEntriesWaitedForAToken) {
  ManualClock clock;
  Recorder observer;
  RateLimitGate gate(/*max_rps=*/10, /*burst=*/1, &observer);
  gate.OnSent(clock.Now());
  EXPECT_EQ(observer.waited, 0) << "the first token was there";
  clock.Advance(Millis(20));
  gate.OnHeldBack(clock.Now());  // entries ready, no token until 100 ms
  clock.Advance(Millis(30));
  gate.OnHeldBack(clock.Now());  // still the same wait: counted once
  clock.Advance(Millis(150));    // the pump got a connection only at 200 ms
  gate.OnSent(clock.Now());
  EXPECT_NEAR(observer.waited, 0.080, 1e-9) << "from 20 ms to the token at 100 ms, not to 200 ms";
  clock.Advance(Millis(500));
  gate.OnSent(clock.Now());
  EXPECT_NEAR(observer.waited, 0.080, 1e-9) << "nothing held back: no wait counted";
}

// A sharded subscription's shard loops share one bucket (runtime/shared_token_bucket.h), each
// loop's gate on its own thread: the token is claimed in one step with the check, so two loops
// that both found the last one open cannot both send; the loser's gate is closed until the next
// token, a time its loop's timer is armed at.
TEST(RateLimitGate, GatesSharingABucketClaimEachTokenOnce) {
  ManualClock clock;
  Recorder observer;
  auto bucket = std::make_shared<SharedTokenBucket>(/*rate=*/2, /*burst=*/2);
  RateLimitGate one(bucket, &observer);
  RateLimitGate two(bucket, &observer);
  ASSERT_TRUE(one.Claim(clock.Now()));
  one.OnSent(clock.Now());  // the claimed token: not taken twice
  EXPECT_TRUE(one.StateAt(clock.Now()).open) << "burst 2: one token left, for either loop";
  EXPECT_TRUE(two.StateAt(clock.Now()).open);
  ASSERT_TRUE(two.Claim(clock.Now()));
  two.OnSent(clock.Now());
  EXPECT_FALSE(one.Claim(clock.Now())) << "the burst is the subscription's, not each loop's";
  for (const RateLimitGate* gate : {&one, &two}) {
    const GateState closed = gate->StateAt(clock.Now());
    EXPECT_FALSE(closed.open);
    ASSERT_TRUE(closed.reopens_at.has_value());
    EXPECT_EQ(*closed.reopens_at, clock.Now() + Millis(500)) << "the next token, by a timer";
  }
  clock.Advance(Millis(500));
  EXPECT_TRUE(two.Claim(clock.Now()));
  EXPECT_FALSE(one.Claim(clock.Now())) << "one token a half second, whichever loop asks";
}

// --- the circuit breaker
// ---------------------------------------------------------------------------

struct Breaker {
  explicit Breaker(int failures = 3, Millis open_for = Millis(30'000)) {
    config::CircuitBreakerConfig config;
    config.failures = failures;
    config.open_for = open_for;
    delivery::OutcomePolicy policy;
    policy.reject_statuses = {400, 422};
    gate = std::make_unique<CircuitBreakerGate>("orders", config, policy, &observer);
  }
  // One request sent and answered at the clock's time.
  void Exchange(const delivery::HandlerResponse& response) {
    gate->OnSent(clock.Now());
    gate->OnAnswer(response, clock.Now());
  }
  bool open() const { return gate->StateAt(clock.Now()).open; }

  ManualClock clock;
  Recorder observer;
  std::unique_ptr<CircuitBreakerGate> gate;
};

TEST(CircuitBreakerGate, OpensAfterFailuresRetryOutcomesInARow) {
  Breaker b(3);
  b.Exchange(k503);
  b.Exchange(Answer(Kind::kTimeout));
  EXPECT_TRUE(b.open());
  EXPECT_EQ(b.gate->state(), CircuitState::kClosed);
  b.Exchange(Answer(Kind::kError));
  EXPECT_FALSE(b.open()) << "503, timeout, reset: three retry outcomes";
  EXPECT_EQ(b.gate->state(), CircuitState::kOpen);
  EXPECT_EQ(b.observer.states, std::vector<CircuitState>{CircuitState::kOpen});
  const GateState state = b.gate->StateAt(b.clock.Now());
  EXPECT_EQ(state.reopens_at, b.clock.Now() + Millis(30'000));
  EXPECT_EQ(state.reads, GateState::Reads::kWaitWhileHeld) << "as when the handler refuses";
}

TEST(CircuitBreakerGate, ASuccessOrARejectInBetweenStartsTheCountAgain) {
  Breaker b(3);
  for (const auto& between :
       {k200, Answer(Kind::kAnswered, 422), Answer(Kind::kAnswered, 200, R"({"status":"DROP"})")}) {
    b.Exchange(k503);
    b.Exchange(k503);
    b.Exchange(between);
    EXPECT_TRUE(b.open()) << between.status << " " << between.body;
  }
  b.Exchange(k503);
  b.Exchange(Answer(Kind::kAnswered, 200, R"({"status":"retry"})"));
  EXPECT_TRUE(b.open());
  b.Exchange(Answer(Kind::kAnswered, 429));
  EXPECT_FALSE(b.open()) << "a 2xx RETRY and a 429 are retry outcomes too";
}

TEST(CircuitBreakerGate, ARefusedConnectionCountsNeitherWay) {
  Breaker b(2);
  b.Exchange(k503);
  b.Exchange(kRefused);
  EXPECT_TRUE(b.open());
  b.Exchange(k503);
  EXPECT_FALSE(b.open()) << "the refusal between two failures did not reset the streak";
}

TEST(CircuitBreakerGate, AfterOpenForExactlyOneProbeThenItsSuccessCloses) {
  Breaker b(1, Millis(5000));
  b.Exchange(k503);
  b.clock.Advance(Millis(4999));
  EXPECT_FALSE(b.open());
  b.clock.Advance(Millis(1));
  EXPECT_TRUE(b.open()) << "half-open: one request may go";
  EXPECT_EQ(b.gate->StateAt(b.clock.Now()).reads, GateState::Reads::kWaitWhileHeld);
  b.gate->OnSent(b.clock.Now());
  EXPECT_EQ(b.gate->state(), CircuitState::kHalfOpen);
  const GateState probing = b.gate->StateAt(b.clock.Now());
  EXPECT_FALSE(probing.open) << "exactly one request while half-open";
  EXPECT_EQ(probing.reopens_at, std::nullopt) << "the probe's answer decides, not the clock";
  b.clock.Advance(Millis(60'000));
  EXPECT_FALSE(b.open()) << "still waiting for the probe";
  b.gate->OnAnswer(k200, b.clock.Now());
  EXPECT_TRUE(b.open());
  EXPECT_EQ(b.gate->state(), CircuitState::kClosed);
  EXPECT_EQ(b.observer.states,
            (std::vector<CircuitState>{CircuitState::kOpen, CircuitState::kHalfOpen,
                                       CircuitState::kClosed}));
}

TEST(CircuitBreakerGate, AFailedProbeOpensItForAnotherOpenFor) {
  Breaker b(2, Millis(1000));
  b.Exchange(k503);
  b.Exchange(k503);
  b.clock.Advance(Millis(1000));
  b.gate->OnSent(b.clock.Now());
  b.clock.Advance(Millis(300));
  b.gate->OnAnswer(Answer(Kind::kTimeout), b.clock.Now());
  EXPECT_EQ(b.gate->state(), CircuitState::kOpen);
  EXPECT_EQ(b.gate->StateAt(b.clock.Now()).reopens_at, b.clock.Now() + Millis(1000))
      << "another open_for from the probe's answer";
  b.clock.Advance(Millis(1000));
  b.Exchange(k200);
  EXPECT_EQ(b.gate->state(), CircuitState::kClosed);
  b.Exchange(k503);
  EXPECT_TRUE(b.open()) << "closed again: the count starts from zero";
}

TEST(CircuitBreakerGate, WhileOpenLateAnswersAreIgnored) {
  Breaker b(1, Millis(1000));
  b.gate->OnSent(b.clock.Now());  // two requests out
  b.gate->OnSent(b.clock.Now());
  b.gate->OnAnswer(k503, b.clock.Now());
  ASSERT_EQ(b.gate->state(), CircuitState::kOpen);
  b.clock.Advance(Millis(500));
  b.gate->OnAnswer(k200, b.clock.Now());
  EXPECT_EQ(b.gate->state(), CircuitState::kOpen) << "sent before it opened: says nothing new";
  EXPECT_FALSE(b.open());
}

TEST(CircuitBreakerGate, ARefusedProbeLeavesItHalfOpenForTheNextRequest) {
  Breaker b(1, Millis(1000));
  b.Exchange(k503);
  b.clock.Advance(Millis(1000));
  b.gate->OnSent(b.clock.Now());
  b.gate->OnAnswer(kRefused, b.clock.Now());
  EXPECT_TRUE(b.open()) << "the probe reached nothing: another may go";
  b.Exchange(k200);
  EXPECT_EQ(b.gate->state(), CircuitState::kClosed);
}

TEST(CircuitBreakerGate, TheLedgerPausesReadsAndDeliveryWhileOpen) {
  ManualClock clock;
  Recorder observer;
  config::CircuitBreakerConfig config;
  config.failures = 1;
  config.open_for = Millis(2000);
  DeliveryGates gates;
  gates.Add(
      std::make_unique<CircuitBreakerGate>("orders", config, delivery::OutcomePolicy{}, &observer));
  gates.OnSent(clock.Now());
  gates.OnAnswer(k503, clock.Now());
  const EntryLedger::Pause pause = gates.PauseAt(clock.Now());
  EXPECT_EQ(pause.until, clock.Now() + Millis(2000));
  EXPECT_TRUE(pause.reads_wait_while_held);
  EXPECT_FALSE(gates.Open(clock.Now()));
}

}  // namespace
}  // namespace streamcar::runtime
