// The delivery gates (runtime/delivery_gate.h) on a manual clock: the refused-connect pause
// (SPEC 3.2), the health check's (SPEC 3.1), and what they say together as the ledger's pause.

#include "sidecar/runtime/delivery_gates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "sidecar/runtime/health_gate.h"
#include "sidecar/runtime/refused_connect_gate.h"

namespace streamcar::runtime {
namespace {

delivery::HandlerResponse Answer(delivery::HandlerResponse::Kind kind, int status = 0) {
  delivery::HandlerResponse response;
  response.kind = kind;
  response.status = status;
  return response;
}
const delivery::HandlerResponse kRefused = Answer(delivery::HandlerResponse::Kind::kRefused);

TEST(RefusedConnectGate, OpenUntilTheHandlerRefuses) {
  ManualClock clock;
  RefusedConnectGate gate("orders", "http://127.0.0.1:1/");
  const GateState state = gate.StateAt(clock.Now());
  EXPECT_TRUE(state.open);
  EXPECT_EQ(state.reads, GateState::Reads::kGoOn);
  gate.OnAnswer(Answer(delivery::HandlerResponse::Kind::kAnswered, 503), clock.Now());
  EXPECT_TRUE(gate.StateAt(clock.Now()).open) << "a 503 is an answer: the handler was reached";
}

TEST(RefusedConnectGate, ARefusalClosesItForABackoffThatGrowsToTwoSeconds) {
  ManualClock clock;
  RefusedConnectGate gate("orders", "http://127.0.0.1:1/");
  Millis longest{0};
  for (int refusal = 0; refusal < 10; ++refusal) {
    gate.OnAnswer(kRefused, clock.Now());
    const GateState state = gate.StateAt(clock.Now());
    ASSERT_FALSE(state.open);
    ASSERT_TRUE(state.reopens_at.has_value()) << "it opens by itself";
    EXPECT_EQ(state.reads, GateState::Reads::kWaitWhileHeld);
    const Millis pause = std::chrono::duration_cast<Millis>(*state.reopens_at - clock.Now());
    EXPECT_GT(pause, Millis(0));
    EXPECT_LE(pause,
              refusal == 0 ? RefusedConnectGate::kFirstPause : RefusedConnectGate::kLongestPause);
    longest = std::max(longest, pause);
    clock.Advance(pause);
    // The pause is over: one more POST may try the handler; reads still wait while held.
    const GateState after = gate.StateAt(clock.Now());
    EXPECT_TRUE(after.open);
    EXPECT_EQ(after.reads, GateState::Reads::kWaitWhileHeld);
  }
  EXPECT_GT(longest, RefusedConnectGate::kFirstPause) << "the backoff grows";
}

TEST(RefusedConnectGate, AnyAnswerOpensItAtOnceAndStartsTheBackoffAgain) {
  ManualClock clock;
  RefusedConnectGate gate("orders", "http://127.0.0.1:1/");
  for (int i = 0; i < 6; ++i) gate.OnAnswer(kRefused, clock.Now());
  gate.OnAnswer(Answer(delivery::HandlerResponse::Kind::kTimeout), clock.Now());
  const GateState state = gate.StateAt(clock.Now());
  EXPECT_TRUE(state.open);
  EXPECT_EQ(state.reads, GateState::Reads::kGoOn);
  gate.OnAnswer(kRefused, clock.Now());
  EXPECT_LE(*gate.StateAt(clock.Now()).reopens_at, clock.Now() + RefusedConnectGate::kFirstPause);
}

TEST(RefusedConnectGate, ALaterRefusalNeverShortensThePause) {
  ManualClock clock;
  RefusedConnectGate gate("orders", "http://127.0.0.1:1/");
  for (int i = 0; i < 6; ++i) gate.OnAnswer(kRefused, clock.Now());
  const SteadyTime until = *gate.StateAt(clock.Now()).reopens_at;
  // Another request, refused a moment earlier but answered now with a shorter backoff drawn: the
  // pause in place stands.
  gate.OnAnswer(kRefused, clock.Now() - Millis(1500));
  EXPECT_GE(*gate.StateAt(clock.Now()).reopens_at, until);
}

TEST(HealthGate, ClosedUntilTheFirstCheckPassesAndWhileChecksFail) {
  ManualClock clock;
  HealthGate gate;
  GateState state = gate.StateAt(clock.Now());
  EXPECT_FALSE(state.open) << "nothing is delivered before the first check passes";
  EXPECT_EQ(state.reopens_at, std::nullopt) << "only a verdict opens it";
  EXPECT_EQ(state.reads, GateState::Reads::kWaitWhileClosed);
  gate.SetHealthy(true);
  clock.Advance(Millis(1000));
  EXPECT_TRUE(gate.StateAt(clock.Now()).open);
  gate.SetHealthy(false);
  EXPECT_FALSE(gate.StateAt(clock.Now()).open);
}

TEST(DeliveryGates, OpenOnlyWhileEveryGateIs) {
  ManualClock clock;
  DeliveryGates gates;
  EXPECT_TRUE(gates.Open(clock.Now())) << "no gate, nothing holds delivery";
  auto health = std::make_unique<HealthGate>();
  HealthGate* h = health.get();
  gates.Add(std::make_unique<RefusedConnectGate>("orders", "http://127.0.0.1:1/"));
  gates.Add(std::move(health));
  EXPECT_FALSE(gates.Open(clock.Now()));
  h->SetHealthy(true);
  EXPECT_TRUE(gates.Open(clock.Now()));
  gates.OnAnswer(kRefused, clock.Now());  // told to every gate
  EXPECT_FALSE(gates.Open(clock.Now()));
  clock.Advance(RefusedConnectGate::kFirstPause);
  EXPECT_TRUE(gates.Open(clock.Now()));
}

TEST(DeliveryGates, TheLedgersPauseIsWhatTheGatesThatHoldReadsSayTogether) {
  ManualClock clock;
  DeliveryGates gates;
  auto health = std::make_unique<HealthGate>();
  HealthGate* h = health.get();
  gates.Add(std::make_unique<RefusedConnectGate>("orders", "http://127.0.0.1:1/"));
  gates.Add(std::move(health));

  EntryLedger::Pause pause = gates.PauseAt(clock.Now());
  EXPECT_EQ(pause.until, SteadyTime::max()) << "unhealthy: until a verdict lifts it";
  EXPECT_FALSE(pause.reads_wait_while_held);

  h->SetHealthy(true);
  pause = gates.PauseAt(clock.Now());
  EXPECT_EQ(pause.until, SteadyTime{});
  EXPECT_FALSE(pause.reads_wait_while_held);

  gates.OnAnswer(kRefused, clock.Now());
  pause = gates.PauseAt(clock.Now());
  EXPECT_GT(pause.until, clock.Now());
  EXPECT_LE(pause.until, clock.Now() + RefusedConnectGate::kFirstPause);
  EXPECT_TRUE(pause.reads_wait_while_held);

  h->SetHealthy(false);  // both closed: the one that opens only when told wins
  EXPECT_EQ(gates.PauseAt(clock.Now()).until, SteadyTime::max());

  h->SetHealthy(true);
  clock.Advance(RefusedConnectGate::kFirstPause);
  pause = gates.PauseAt(clock.Now());
  EXPECT_LE(pause.until, clock.Now()) << "the refusal's pause ended";
  EXPECT_TRUE(pause.reads_wait_while_held) << "until the handler answers";
}

}  // namespace
}  // namespace streamcar::runtime
