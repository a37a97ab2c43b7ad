// The liveness watchdog behind /healthz (SPEC 5: 200 while every loop is alive, 503 once one is
// wedged), with time injected: no sleeping.

#include <gtest/gtest.h>

#include "sidecar/admin/health.h"

namespace streamcar::admin {
namespace {

TEST(Watchdog, AliveWhileEveryLoopBeatsWithinItsLimit) {
  ManualClock clock;
  Watchdog watchdog(&clock);
  auto* reader = watchdog.Register("orders/reader", Millis(1000));
  auto* settler = watchdog.Register("orders/settler", Millis(5000));
  EXPECT_EQ(watchdog.FindWedged(), "");
  for (int i = 0; i < 10; ++i) {
    clock.Advance(Millis(900));
    reader->Beat();
    settler->Beat();
    EXPECT_EQ(watchdog.FindWedged(), "") << i;
  }
}

TEST(Watchdog, ALoopSilentLongerThanItsLimitIsNamed) {
  ManualClock clock;
  Watchdog watchdog(&clock);
  auto* reader = watchdog.Register("orders/reader", Millis(1000));
  auto* worker = watchdog.Register("orders/worker0", Millis(3000));
  clock.Advance(Millis(1000));
  EXPECT_EQ(watchdog.FindWedged(), "");  // exactly at the limit is still alive
  clock.Advance(Millis(1));
  worker->Beat();
  EXPECT_EQ(watchdog.FindWedged(), "orders/reader");
  // A beat brings it back.
  reader->Beat();
  EXPECT_EQ(watchdog.FindWedged(), "");
  // Each loop has its own limit: the worker may be silent for 3 s, not 3.001.
  clock.Advance(Millis(999));
  reader->Beat();
  clock.Advance(Millis(999));
  reader->Beat();
  clock.Advance(Millis(1002));  // the worker's last beat was 3000 ms ago: still alive
  reader->Beat();
  EXPECT_EQ(watchdog.FindWedged(), "");
  clock.Advance(Millis(1));
  EXPECT_EQ(watchdog.FindWedged(), "orders/worker0");
}

TEST(Watchdog, ARetiredLoopIsNoLongerChecked) {
  ManualClock clock;
  Watchdog watchdog(&clock);
  auto* reader = watchdog.Register("orders/reader", Millis(100));
  reader->Retire();
  clock.Advance(Millis(60000));
  EXPECT_EQ(watchdog.FindWedged(), "");
  auto* late = watchdog.Register("late", Millis(100));  // registering counts as a first beat
  EXPECT_EQ(watchdog.FindWedged(), "");
  clock.Advance(Millis(101));
  EXPECT_EQ(watchdog.FindWedged(), "late");
  late->Beat();
  EXPECT_EQ(watchdog.FindWedged(), "");
}

// A sharded subscription starts and ends a loop per grant: the retired ones are forgotten, so
// the watchdog does not grow with churn.
TEST(Watchdog, RetiredLoopsAreForgottenAtTheNextRegister) {
  ManualClock clock;
  Watchdog watchdog(&clock);
  auto* member = watchdog.Register("orders/member", Millis(1000));
  for (int grant = 0; grant < 1000; ++grant) {
    watchdog.Register("orders/shard-3/loop", Millis(1000))->Retire();
  }
  auto* last = watchdog.Register("orders/shard-3/loop", Millis(1000));
  EXPECT_EQ(watchdog.kept(), 2u);
  clock.Advance(Millis(1001));
  member->Beat();
  EXPECT_EQ(watchdog.FindWedged(), "orders/shard-3/loop");
  last->Beat();
  EXPECT_EQ(watchdog.FindWedged(), "");
}

// The one formula every loop registers with: twice its longest blocking step, and 30 s more.
TEST(WatchdogTest, ALoopsLimitIsTwiceItsLongestStepAndThirtySecondsMore) {
  EXPECT_EQ(Watchdog::LimitFor(Millis(5000)), Millis(40000));
  EXPECT_EQ(Watchdog::LimitFor(Millis(0)), Millis(30000));
  EXPECT_EQ(Watchdog::LimitFor(Millis(60000) + Millis(5000)), Millis(160000));
}

}  // namespace
}  // namespace streamcar::admin
