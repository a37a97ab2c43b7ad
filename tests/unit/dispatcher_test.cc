#include "sidecar/consumer/dispatcher.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// SPEC 3.2: an entry a keepalive found another consumer's (a lost lease) is dropped wherever it
// is: waiting, queued, or in flight when the handler refused the connection.
TEST(Dispatcher, ALostEntryIsNeverHandedOutAgain) {
  Dispatcher d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0", "B")});
  auto work = d.TakeWork(10, Millis(0));
  ASSERT_EQ(Ids(work), (std::vector<std::string>{"1-0", "3-0"}));
  EXPECT_EQ(d.MarkLost("3-0"), Dispatcher::LostResult::kDropped);  // in flight: marked
  EXPECT_EQ(d.MarkLost("3-0"), Dispatcher::LostResult::kIgnored);  // counted once
  EXPECT_EQ(d.MarkLost("2-0"), Dispatcher::LostResult::kDropped);  // blocked: released now
  d.HoldForHandler(work, Millis(0));  // the handler refused both in-flight POSTs
  EXPECT_EQ(d.Held(), 1u);
  EXPECT_EQ(d.in_flight(), 0u);
  d.HandlerAnswered();
  EXPECT_EQ(Ids(d.TakeWork(10, Millis(0))), std::vector<std::string>{"1-0"});
  EXPECT_EQ(d.MarkLost("9-0"), Dispatcher::LostResult::kIgnored);  // not held
}

TEST(Dispatcher, OnlyEntriesNeverPostedSinceTheirReadAreUnposted) {
  Dispatcher d(10, "");
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")});
  auto work = d.TakeWork(2, Millis(0));    // 1-0 and 2-0 go out
  d.HoldForHandler({work[1]}, Millis(0));  // 2-0 was refused: not a delivery
  d.ScheduleRetry(work[0], SteadyClock::now() + Millis(60000));
  auto unposted = d.UnpostedIds();
  std::sort(unposted.begin(), unposted.end());
  EXPECT_EQ(unposted, (std::vector<std::string>{"2-0", "3-0"}));
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

// An entry whose payload is `bytes` bytes: field "d" (1 byte) and a value of bytes - 1.
StreamEntry Sized(const std::string& id, uint64_t bytes) {
  StreamEntry e;
  e.id = id;
  e.fields.push_back({"d", std::string(bytes - 1, 'x')});
  return e;
}

std::vector<StreamEntry> SizedRun(int first, int n, uint64_t bytes) {
  std::vector<StreamEntry> out;
  for (int i = first; i < first + n; ++i) out.push_back(Sized(std::to_string(i) + "-0", bytes));
  return out;
}

// Admits what Room() allows, as the reader does, until Room() says stop; returns the reads.
int FillAsTheReaderDoes(Dispatcher& d, int* next_id, uint64_t bytes) {
  int reads = 0;
  while (size_t room = d.Room()) {
    d.Admit(SizedRun(*next_id, static_cast<int>(room), bytes));
    *next_id += static_cast<int>(room);
    ++reads;
  }
  return reads;
}

TEST(DispatcherBytes, CountsFieldNamesAndValues) {
  StreamEntry e;
  e.fields = {{"ab", "cde"}, {"f", ""}, {"ab", "x"}};
  EXPECT_EQ(Dispatcher::PayloadBytes(e), 2u + 3u + 1u + 0u + 2u + 1u);
  Dispatcher d(10, "", 1000);
  d.Admit({e});
  EXPECT_EQ(d.HeldBytes(), 9u);
  auto work = d.TakeWork(1, Millis(0));
  d.MarkSettling(work[0]);
  d.Release(work[0]);
  EXPECT_EQ(d.HeldBytes(), 0u);
}

TEST(DispatcherBytes, FirstReadIsAQuarterOfTheCapacityUntilASizeIsKnown) {
  Dispatcher d(64, "", 32 << 20);
  EXPECT_EQ(d.Room(), 16u);  // nothing known about entry sizes yet: one round of the workers
  d.Admit({Sized("1-0", 1 << 20)});
  // 1 MiB entries: a read brings a quarter of the 32 MiB budget at most.
  EXPECT_EQ(d.Room(), 8u);
}

TEST(DispatcherBytes, HeldBytesNeverExceedTheBudgetForSteadySizes) {
  const uint64_t budget = 32 << 20;
  Dispatcher d(64, "", budget);
  int next = 1;
  FillAsTheReaderDoes(d, &next, 1 << 20);
  EXPECT_LE(d.HeldBytes(), budget);
  EXPECT_GE(d.HeldBytes(), budget - (1 << 20));  // and the budget is used, not wasted
  EXPECT_EQ(d.Held(), 32u);                      // not the 64 the entry capacity allows
  // Releasing one entry makes room for exactly one more.
  auto work = d.TakeWork(1, Millis(0));
  d.MarkSettling(work[0]);
  d.Release(work[0]);
  EXPECT_EQ(d.Room(), 1u);
  d.Admit(SizedRun(next++, 1, 1 << 20));
  EXPECT_EQ(d.Room(), 0u);
  EXPECT_LE(d.HeldBytes(), budget);
}

TEST(DispatcherBytes, SmallEntriesAreBoundedByTheEntryCapacity) {
  Dispatcher d(64, "", 32 << 20);
  int next = 1;
  FillAsTheReaderDoes(d, &next, 100);
  EXPECT_EQ(d.Held(), 64u);
  EXPECT_EQ(d.HeldBytes(), 6400u);
}

TEST(DispatcherBytes, AnEntryLargerThanTheBudgetIsTakenAlone) {
  const uint64_t budget = 1 << 20;
  Dispatcher d(64, "", budget);
  int next = 1;
  d.Admit(SizedRun(next++, 1, 100));
  d.Admit(SizedRun(next++, 1, 3 << 20));  // larger than the whole budget
  EXPECT_EQ(d.Room(), 0u);                // nothing more while anything is held
  auto work = d.TakeWork(10, Millis(0));
  ASSERT_EQ(work.size(), 2u);
  d.MarkSettling(work[0]);
  d.Release(work[0]);
  EXPECT_EQ(d.Room(), 0u);  // the huge one is still held
  EXPECT_EQ(d.WaitForRoom(Millis(0)), 0u);
  d.MarkSettling(work[1]);
  d.Release(work[1]);
  EXPECT_EQ(d.Room(), 1u);  // nothing held: one more, alone, however large
  EXPECT_EQ(d.WaitForRoom(Millis(0)), 1u);
  d.Admit(SizedRun(next++, 1, 3 << 20));
  EXPECT_EQ(d.Room(), 0u);
}

TEST(DispatcherBytes, EntriesOverAQuarterOfTheBudgetAreReadOneAtATimeWhileTheyFit) {
  const uint64_t budget = 32 << 20;
  Dispatcher d(64, "", budget);
  int next = 1;
  d.Admit(SizedRun(next++, 1, 10 << 20));
  EXPECT_EQ(d.Room(), 1u);  // 22 MiB free: two would fit, but a read takes one this large
  d.Admit(SizedRun(next++, 1, 10 << 20));
  EXPECT_EQ(d.Room(), 1u);
  d.Admit(SizedRun(next++, 1, 10 << 20));
  EXPECT_EQ(d.Room(), 0u);  // 30 MiB held, 2 MiB free
  EXPECT_LE(d.HeldBytes(), budget);
}

TEST(DispatcherBytes, NoReadWhileTheRecentSizeDoesNotFit) {
  const uint64_t budget = 10 << 20;
  Dispatcher d(64, "", budget);
  int next = 1;
  d.Admit(SizedRun(next, 1, 4 << 20));  // a 4 MiB entry, then small ones
  next += 1;
  d.Admit(SizedRun(next, 3, 1 << 20));
  next += 3;
  // 7 MiB held, 3 MiB free, and entries of up to 4 MiB were seen lately: no read.
  EXPECT_EQ(d.HeldBytes(), uint64_t{7} << 20);
  EXPECT_EQ(d.Room(), 0u);
}

TEST(DispatcherBytes, TheEstimateForgetsAnOldLargeEntry) {
  const uint64_t budget = 8 << 20;
  Dispatcher d(1000, "", budget);
  d.Admit({Sized("1-0", 4 << 20)});
  auto work = d.TakeWork(1, Millis(0));
  d.MarkSettling(work[0]);
  d.Release(work[0]);
  EXPECT_EQ(d.Room(), 1u);  // budget/4 = 2 MiB < 4 MiB: one at a time while it is recent
  int next = 2;
  for (size_t i = 0; i < Dispatcher::kSizeWindow; ++i) {
    d.Admit(SizedRun(next++, 1, 1024));
    auto w = d.TakeWork(1, Millis(0));
    d.MarkSettling(w[0]);
    d.Release(w[0]);
  }
  // The 4 MiB entry left the window: reads are sized for 1 KiB entries again.
  EXPECT_EQ(d.Room(), std::min<size_t>(1000, (budget / 4) / 1024));
}

TEST(DispatcherBytes, WorkersIdleMakesASmallReadWorthIt) {
  Dispatcher d(64, "", 32 << 20);
  int next = 1;
  FillAsTheReaderDoes(d, &next, 1 << 20);
  auto work = d.TakeWork(64, Millis(0));  // every held entry is in flight: ready_ is empty
  d.MarkSettling(work[0]);
  d.Release(work[0]);
  EXPECT_EQ(d.WaitForRoom(Millis(0)), 1u);
}

TEST(DispatcherBytes, WithoutAByteLimitOnlyEntriesCount) {
  Dispatcher d(4, "");
  d.Admit({Sized("1-0", 8 << 20)});
  EXPECT_EQ(d.Room(), 3u);
}

}  // namespace
}  // namespace streamcar::consumer
