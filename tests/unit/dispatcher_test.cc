#include "sidecar/consumer/dispatcher.h"

#include <gtest/gtest.h>

#include <thread>

namespace streamcar::consumer {
namespace {

StreamEntry Entry(const std::string& id, const std::string& key = "") {
  StreamEntry e;
  e.id = id;
  if (!key.empty()) e.fields.push_back({"account", key});
  e.fields.push_back({"n", id});
  return e;
}

std::vector<std::string> Ids(const std::vector<HeldEntry*>& work) {
  std::vector<std::string> ids;
  for (auto* e : work) ids.push_back(e->entry.id);
  return ids;
}

TEST(Dispatcher, RoomShrinksAsEntriesAreHeld) {
  Dispatcher d(4, "");
  EXPECT_EQ(d.Room(), 4u);
  EXPECT_EQ(d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")}), 3u);
  EXPECT_EQ(d.Room(), 1u);
  auto work = d.TakeWork(10, Millis(0));
  ASSERT_EQ(work.size(), 3u);
  d.MarkSettling(work[0]);
  d.Release(work[0]);
  EXPECT_EQ(d.Room(), 2u);
}

TEST(Dispatcher, IgnoresIdsAlreadyHeld) {
  Dispatcher d(10, "");
  d.Admit({Entry("1-0")});
  EXPECT_EQ(d.Admit({Entry("1-0"), Entry("2-0")}), 1u);
  EXPECT_EQ(d.Held(), 2u);
}

TEST(Dispatcher, TakeWorkHonoursBatchSize) {
  Dispatcher d(10, "");
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")});
  EXPECT_EQ(Ids(d.TakeWork(2, Millis(0))), (std::vector<std::string>{"1-0", "2-0"}));
  EXPECT_EQ(Ids(d.TakeWork(2, Millis(0))), (std::vector<std::string>{"3-0"}));
  EXPECT_TRUE(d.TakeWork(2, Millis(0)).empty());
  EXPECT_EQ(d.in_flight(), 3u);
}

TEST(Dispatcher, SameKeyIsDeliveredOneAtATimeInOrder) {
  Dispatcher d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0", "B"), Entry("4-0", "A")});
  auto first = d.TakeWork(10, Millis(0));
  EXPECT_EQ(Ids(first), (std::vector<std::string>{"1-0", "3-0"}));  // 2-0 and 4-0 wait for 1-0
  d.MarkSettling(first[0]);
  d.Release(first[0]);
  auto second = d.TakeWork(10, Millis(0));
  EXPECT_EQ(Ids(second), (std::vector<std::string>{"2-0"}));
  d.MarkSettling(second[0]);
  d.Release(second[0]);
  EXPECT_EQ(Ids(d.TakeWork(10, Millis(0))), (std::vector<std::string>{"4-0"}));
}

TEST(Dispatcher, RetryHoldsItsKeyBackButNotOthers) {
  Dispatcher d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0", "B")});
  auto work = d.TakeWork(10, Millis(0));
  ASSERT_EQ(Ids(work), (std::vector<std::string>{"1-0", "3-0"}));
  const auto now = SteadyClock::now();
  d.ScheduleRetry(work[0], now + Millis(50));
  d.MarkSettling(work[1]);
  d.Release(work[1]);
  d.Admit({Entry("5-0", "C")});
  EXPECT_EQ(Ids(d.TakeWork(10, Millis(0))), (std::vector<std::string>{"5-0"}));  // A still held
  EXPECT_TRUE(d.TakeDueRetries(now).empty());
  auto due = d.TakeDueRetries(now + Millis(60));
  ASSERT_EQ(Ids(due), (std::vector<std::string>{"1-0"}));
  d.Requeue(due[0]);
  EXPECT_EQ(Ids(d.TakeWork(10, Millis(0))), (std::vector<std::string>{"1-0"}));
}

TEST(Dispatcher, EntriesWithoutTheKeyFieldAreUnordered) {
  Dispatcher d(10, "account");
  d.Admit({Entry("1-0"), Entry("2-0")});
  EXPECT_EQ(d.TakeWork(10, Millis(0)).size(), 2u);
}

TEST(Dispatcher, HandlerRefusalPausesAndRequeuesAtTheFront) {
  Dispatcher d(10, "");
  d.Admit({Entry("1-0"), Entry("2-0")});
  auto work = d.TakeWork(1, Millis(0));
  d.HoldForHandler(work, Millis(200));
  EXPECT_TRUE(d.handler_paused());
  EXPECT_EQ(d.WaitForRoom(Millis(0)), 0u);  // no reads while the handler is down
  EXPECT_TRUE(d.TakeWork(1, Millis(0)).empty());
  d.HandlerAnswered();
  EXPECT_EQ(Ids(d.TakeWork(1, Millis(0))), (std::vector<std::string>{"1-0"}));
}

TEST(Dispatcher, PauseEndsByItself) {
  Dispatcher d(10, "");
  d.Admit({Entry("1-0")});
  d.HoldForHandler(d.TakeWork(1, Millis(0)), Millis(30));
  auto work = d.TakeWork(1, Millis(1000));
  EXPECT_EQ(work.size(), 1u);
}

TEST(Dispatcher, HealthPauseBlocksUntilLifted) {
  Dispatcher d(10, "");
  d.SetHealthPaused(true);
  d.Admit({Entry("1-0")});
  EXPECT_TRUE(d.TakeWork(1, Millis(20)).empty());
  d.SetHealthPaused(false);
  EXPECT_EQ(d.TakeWork(1, Millis(0)).size(), 1u);
}

TEST(Dispatcher, StopWakesWaitingWorkers) {
  Dispatcher d(10, "");
  std::thread stopper([&] {
    std::this_thread::sleep_for(Millis(20));
    d.Stop();
  });
  auto start = SteadyClock::now();
  EXPECT_TRUE(d.TakeWork(1, Millis(5000)).empty());
  EXPECT_LT(SteadyClock::now() - start, Millis(4000));
  stopper.join();
  EXPECT_TRUE(d.stopped());
}

// Every release of a lane's head hands the lane to the next entry, in id order, with nothing
// handed out meanwhile; once the last is released the lane is gone and the key is free again.
// (No caller can release an entry still blocked in a lane: TakeWork is the only way to get one.)
TEST(Dispatcher, ReleasingTheLaneHeadPassesTheLaneOnUntilItIsFree) {
  Dispatcher d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0", "A")});
  std::vector<std::string> order;
  for (int i = 0; i < 3; ++i) {
    auto work = d.TakeWork(10, Millis(0));
    ASSERT_EQ(work.size(), 1u) << i;
    EXPECT_TRUE(d.TakeWork(10, Millis(0)).empty()) << "the lane is busy";
    EXPECT_EQ(d.HeldIds().size(), static_cast<size_t>(3 - i));
    order.push_back(work[0]->entry.id);
    d.MarkSettling(work[0]);
    d.Release(work[0]);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"1-0", "2-0", "3-0"}));
  EXPECT_TRUE(d.HeldIds().empty());
  EXPECT_EQ(d.Room(), 10u);
  // The lane is free: a new entry with the key goes at once.
  d.Admit({Entry("4-0", "A")});
  EXPECT_EQ(Ids(d.TakeWork(10, Millis(0))), (std::vector<std::string>{"4-0"}));
}

}  // namespace
}  // namespace streamcar::consumer
