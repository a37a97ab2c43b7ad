#include "sidecar/runtime/entry_ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "sidecar/common/check.h"
#include "sidecar/common/log.h"

namespace streamcar::runtime {
namespace {

using Applied = EntryLedger::Applied;
using LostResult = EntryLedger::LostResult;

StreamEntry Entry(const std::string& id, const std::string& key = "") {
  StreamEntry e;
  e.id = id;
  if (!key.empty()) e.fields.push_back({"account", key});
  e.fields.push_back({"n", id});
  return e;
}

std::vector<std::string> Ids(const std::vector<EntryRef>& refs) {
  std::vector<std::string> ids;
  for (const auto& ref : refs) ids.push_back(ref.id);
  return ids;
}

std::vector<std::string> Sorted(std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

// A 2xx whose acknowledgement Redis confirmed: what the dispatcher's MarkSettling + Release was.
void Settle(EntryLedger& d, const EntryRef& ref) {
  ASSERT_EQ(d.Accept(ref), Applied::kApplied) << ref.id;
  ASSERT_TRUE(d.AckConfirmed(ref.id)) << ref.id;
}

// What the dispatcher's WaitForRoom(0) returned: the room when a read is worth making and
// reading is not paused, else 0.
size_t RoomNow(const EntryLedger& d, SteadyTime now) {
  return d.WorthReading() && !d.ReadPaused(now) ? d.ReadRoom() : 0;
}

// ---- The cases of tests/unit/dispatcher_test.cc, same names and expected values. ----

TEST(EntryLedger, RoomShrinksAsEntriesAreHeld) {
  ManualClock clock;
  EntryLedger d(4, "");
  EXPECT_EQ(d.ReadRoom(), 4u);
  EXPECT_EQ(d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")}), 3u);
  EXPECT_EQ(d.ReadRoom(), 1u);
  auto work = d.TakeReady(10, clock.Now());
  ASSERT_EQ(work.size(), 3u);
  Settle(d, work[0]);
  EXPECT_EQ(d.ReadRoom(), 2u);
}

TEST(EntryLedger, IgnoresIdsAlreadyHeld) {
  EntryLedger d(10, "");
  d.Admit({Entry("1-0")});
  EXPECT_EQ(d.Admit({Entry("1-0"), Entry("2-0")}), 1u);
  EXPECT_EQ(d.held(), 2u);
}

TEST(EntryLedger, TakeWorkHonoursBatchSize) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")});
  EXPECT_EQ(Ids(d.TakeReady(2, clock.Now())), (std::vector<std::string>{"1-0", "2-0"}));
  EXPECT_EQ(Ids(d.TakeReady(2, clock.Now())), (std::vector<std::string>{"3-0"}));
  EXPECT_TRUE(d.TakeReady(2, clock.Now()).empty());
  EXPECT_EQ(d.in_flight(), 3u);
}

TEST(EntryLedger, SameKeyIsDeliveredOneAtATimeInOrder) {
  ManualClock clock;
  EntryLedger d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0", "B"), Entry("4-0", "A")});
  auto first = d.TakeReady(10, clock.Now());
  EXPECT_EQ(Ids(first), (std::vector<std::string>{"1-0", "3-0"}));  // 2-0 and 4-0 wait for 1-0
  Settle(d, first[0]);
  auto second = d.TakeReady(10, clock.Now());
  EXPECT_EQ(Ids(second), (std::vector<std::string>{"2-0"}));
  Settle(d, second[0]);
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"4-0"}));
}

TEST(EntryLedger, RetryHoldsItsKeyBackButNotOthers) {
  ManualClock clock;
  EntryLedger d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0", "B")});
  auto work = d.TakeReady(10, clock.Now());
  ASSERT_EQ(Ids(work), (std::vector<std::string>{"1-0", "3-0"}));
  const auto now = clock.Now();
  d.ScheduleRetry(work[0], now + Millis(50));
  Settle(d, work[1]);
  d.Admit({Entry("5-0", "C")});
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"5-0"}));  // A still held
  EXPECT_TRUE(d.TakeDueRetries(now).empty());
  auto due = d.TakeDueRetries(now + Millis(60));
  ASSERT_EQ(due, (std::vector<std::string>{"1-0"}));
  d.RetryClaimed(due[0], 2);
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"1-0"}));
}

// A shard of a sharded subscription (SHARDING.md B8): one hand-out at a time (here one entry, a
// batch size of 1), and a retry holds back every later entry, which a handler concurrency of 1
// alone would not.
TEST(EntryLedger, OneLaneKeepsARetryAheadOfEveryLaterEntry) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.OrderAllInOneLane();
  d.Admit({Entry("1-0"), Entry("2-0", "A"), Entry("3-0")});
  auto work = d.TakeReady(1, clock.Now());
  ASSERT_EQ(Ids(work), (std::vector<std::string>{"1-0"}));
  const auto now = clock.Now();
  d.ScheduleRetry(work[0], now + Millis(50));
  EXPECT_TRUE(d.TakeReady(10, clock.Now()).empty()) << "2-0 must not overtake the retry";
  auto due = d.TakeDueRetries(now + Millis(60));
  ASSERT_EQ(due, (std::vector<std::string>{"1-0"}));
  d.RetryClaimed(due[0], 2);
  auto again = d.TakeReady(1, clock.Now());
  ASSERT_EQ(Ids(again), (std::vector<std::string>{"1-0"}));
  Settle(d, again[0]);
  EXPECT_EQ(Ids(d.TakeReady(1, clock.Now())), (std::vector<std::string>{"2-0"}));
}

// A shard with a batch size above 1: its hand-out is its head and the entries waiting behind it,
// in id order, and nothing more goes out until each of them is settled.
TEST(EntryLedger, OneLaneHandsOutARunOfConsecutiveEntriesAndHoldsTheRestUntilItIsSettled) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.OrderAllInOneLane();
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0"), Entry("4-0"), Entry("5-0")});
  auto run = d.TakeReady(3, clock.Now());
  ASSERT_EQ(Ids(run), (std::vector<std::string>{"1-0", "2-0", "3-0"}));
  EXPECT_EQ(d.in_flight(), 3u);
  EXPECT_TRUE(d.TakeReady(3, clock.Now()).empty()) << "one hand-out at a time";
  d.Admit({Entry("6-0")});
  Settle(d, run[0]);
  Settle(d, run[2]);
  EXPECT_TRUE(d.TakeReady(3, clock.Now()).empty()) << "2-0 is still out";
  Settle(d, run[1]);
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"4-0", "5-0", "6-0"}));
  EXPECT_EQ(d.in_flight(), 3u);
}

// The handler failed the second entry of a run (a RETRY, SPEC 9): the first is acknowledged, the
// rest, which it did not reach, go back behind the retry with their attempts as they were, and
// entries read meanwhile come after them.
TEST(EntryLedger, OneLaneRedeliversWhatFollowsAFailedEntryAfterItsRetry) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.OrderAllInOneLane();
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0"), Entry("4-0")});
  auto run = d.TakeReady(4, clock.Now());
  ASSERT_EQ(run.size(), 4u);
  d.Admit({Entry("5-0")});
  ASSERT_EQ(d.Accept(run[0]), Applied::kApplied);
  d.Redeliver(std::span<const EntryRef>(run).subspan(2));
  EXPECT_EQ(d.StateOf("3-0"), EntryState::kBlocked);
  EXPECT_EQ(d.in_flight(), 1u);
  const auto now = clock.Now();
  ASSERT_EQ(d.ScheduleRetry(run[1], now + Millis(50)), Applied::kApplied);
  EXPECT_TRUE(d.TakeReady(10, clock.Now()).empty()) << "3-0 must not overtake the retry of 2-0";
  EXPECT_EQ(d.Entry(run[2]), nullptr) << "the old hand-out's refs are stale";
  auto due = d.TakeDueRetries(now + Millis(60));
  ASSERT_EQ(due, (std::vector<std::string>{"2-0"}));
  ASSERT_TRUE(d.RetryClaimed(due[0], 2));
  auto again = d.TakeReady(10, clock.Now());
  ASSERT_EQ(Ids(again), (std::vector<std::string>{"2-0", "3-0", "4-0", "5-0"}));
  EXPECT_EQ(d.Entry(again[0])->attempts, 2);
  EXPECT_EQ(d.Entry(again[1])->attempts, 1) << "3-0 was not tried: no attempt spent";
  EXPECT_TRUE(d.UnpostedIds().empty()) << "3-0 was posted: its read's delivery happened";
}

// The failed entry of a run is dead-lettered: once its record is written, the entries after it
// go out, in order; a put-back entry that a keepalive found another consumer's is let go.
TEST(EntryLedger, OneLaneGoesOnAfterADeadLetteredEntryWithWhatFollowedIt) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.OrderAllInOneLane();
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0"), Entry("4-0")});
  auto run = d.TakeReady(4, clock.Now());
  ASSERT_EQ(d.MarkLost("4-0"), LostResult::kDropped);
  d.Redeliver(std::span<const EntryRef>(run).subspan(1));
  EXPECT_FALSE(d.Holds("4-0"));
  ASSERT_EQ(d.DeadLetter(run[0]), Applied::kApplied);
  EXPECT_TRUE(d.TakeReady(10, clock.Now()).empty()) << "the dead letter holds the lane";
  ASSERT_TRUE(d.Release("1-0"));
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"2-0", "3-0"}));
}

// The failed entry was let go before its outcome came (all its refs stale): what is put back
// goes out at once, still first.
TEST(EntryLedger, OneLanePassesOnWhenNothingOfTheRunHoldsItAnyMore) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.OrderAllInOneLane();
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")});
  auto run = d.TakeReady(3, clock.Now());
  d.Admit({Entry("4-0")});
  ASSERT_EQ(d.MarkLost("1-0"), LostResult::kDropped);
  ASSERT_EQ(d.ScheduleRetry(run[0], clock.Now()), Applied::kLetGo);
  d.Redeliver(std::span<const EntryRef>(run).subspan(1));
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"2-0", "3-0", "4-0"}));
}

// A run that failed as a whole (a 500, a timeout) charges none of its entries: they go out
// again one per hand-out, in order, so that each meets its own outcome; entries read meanwhile
// form runs again once those are settled.
TEST(EntryLedger, OneLaneSendsARunThatFailedWholeOneEntryAtATime) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.OrderAllInOneLane();
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")});
  auto run = d.TakeReady(10, clock.Now());
  ASSERT_EQ(run.size(), 3u);
  d.Admit({Entry("4-0"), Entry("5-0")});
  d.Redeliver(run, /*alone=*/true);
  EXPECT_EQ(d.in_flight(), 0u);
  auto first = d.TakeReady(10, clock.Now());
  ASSERT_EQ(Ids(first), (std::vector<std::string>{"1-0"}));
  Settle(d, first[0]);
  auto second = d.TakeReady(10, clock.Now());
  ASSERT_EQ(Ids(second), (std::vector<std::string>{"2-0"}));
  const auto now = clock.Now();
  ASSERT_EQ(d.ScheduleRetry(second[0], now + Millis(50)), Applied::kApplied);
  EXPECT_TRUE(d.TakeReady(10, clock.Now()).empty());
  auto due = d.TakeDueRetries(now + Millis(60));
  ASSERT_TRUE(d.RetryClaimed(due.at(0), 2));
  auto again = d.TakeReady(10, clock.Now());
  ASSERT_EQ(Ids(again), (std::vector<std::string>{"2-0"})) << "still alone";
  Settle(d, again[0]);
  auto third = d.TakeReady(10, clock.Now());
  ASSERT_EQ(Ids(third), (std::vector<std::string>{"3-0"}));
  Settle(d, third[0]);
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"4-0", "5-0"}));
}

// The handler refused the connection (no attempt): a run goes back whole, in order, and goes out
// again as the same run, followed by what waits behind it.
TEST(EntryLedger, OneLaneHandsBackARunAndSendsItAgainInOrder) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.OrderAllInOneLane();
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0"), Entry("4-0")});
  auto run = d.TakeReady(2, clock.Now());
  ASSERT_EQ(Ids(run), (std::vector<std::string>{"1-0", "2-0"}));
  d.HandBack(run);
  EXPECT_EQ(d.StateOf("2-0"), EntryState::kQueued);
  EXPECT_EQ(Sorted(d.UnpostedIds()), (std::vector<std::string>{"1-0", "2-0", "3-0", "4-0"}));
  auto again = d.TakeReady(10, clock.Now());
  EXPECT_EQ(Ids(again), (std::vector<std::string>{"1-0", "2-0", "3-0", "4-0"}));
  // Sent in a run that failed whole, then refused alone: its delivery in the run still counts
  // (UnpostedIds gives back only deliveries never made).
  d.Redeliver(again, /*alone=*/true);
  auto alone = d.TakeReady(10, clock.Now());
  ASSERT_EQ(Ids(alone), (std::vector<std::string>{"1-0"}));
  d.HandBack(alone);
  EXPECT_TRUE(d.UnpostedIds().empty());
}

// Nothing of a run could be sent (an unencodable request): every entry is dead-lettered; the
// lane passes on once the last of them is written.
TEST(EntryLedger, OneLanePassesOnOnceEveryDeadLetterOfARunIsWritten) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.OrderAllInOneLane();
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")});
  auto run = d.TakeReady(2, clock.Now());
  ASSERT_EQ(run.size(), 2u);
  for (const auto& ref : run) ASSERT_EQ(d.DeadLetter(ref), Applied::kApplied);
  ASSERT_TRUE(d.Release("1-0"));
  EXPECT_TRUE(d.TakeReady(10, clock.Now()).empty()) << "2-0's dead letter still holds the lane";
  ASSERT_TRUE(d.Release("2-0"));
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"3-0"}));
}

// A shard read one or two entries per POST: with its head out and the rest waiting behind it,
// every place a POST freed looked worth a read (nothing ready, the byte budget free). It now
// waits for a quarter of the capacity, or for its lane to run dry.
TEST(EntryLedger, OneLaneMakesNoSmallReadWhileEntriesWaitBehindItsHead) {
  ManualClock clock;
  EntryLedger d(8, "", 32 << 20);  // reads of 2 or more are worthwhile
  d.OrderAllInOneLane();
  std::vector<StreamEntry> entries;
  for (int i = 1; i <= 7; ++i) entries.push_back(Entry(std::to_string(i) + "-0"));
  d.Admit(std::move(entries));
  for (int i = 1; i <= 6; ++i) {
    auto work = d.TakeReady(1, clock.Now());
    ASSERT_EQ(work.size(), 1u) << i;
    EXPECT_EQ(d.ReadRoom(), 1u) << i;
    EXPECT_FALSE(d.WorthReading()) << 7 - i << " wait behind " << work[0].id;
    // A 2xx whose acknowledgement is not confirmed yet: the place stays taken.
    ASSERT_EQ(d.Accept(work[0]), Applied::kApplied);
  }
  auto last = d.TakeReady(1, clock.Now());
  ASSERT_EQ(Ids(last), (std::vector<std::string>{"7-0"}));
  EXPECT_TRUE(d.WorthReading()) << "the lane runs dry: read what comes next";
  ASSERT_TRUE(d.AckConfirmed("1-0"));
  EXPECT_EQ(d.ReadRoom(), 2u);
  EXPECT_TRUE(d.WorthReading());
}

TEST(EntryLedger, EntriesWithoutTheKeyFieldAreUnordered) {
  ManualClock clock;
  EntryLedger d(10, "account");
  d.Admit({Entry("1-0"), Entry("2-0")});
  EXPECT_EQ(d.TakeReady(10, clock.Now()).size(), 2u);
}

TEST(EntryLedger, HandlerRefusalPausesAndRequeuesAtTheFront) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0"), Entry("2-0")});
  auto work = d.TakeReady(1, clock.Now());
  d.HandBack(work);
  // What the refused-connect gate says then (runtime/refused_connect_gate.h).
  d.SetPause({clock.Now() + Millis(200), /*reads_wait_while_held=*/true});
  EXPECT_TRUE(d.DeliveryPaused(clock.Now()));
  EXPECT_EQ(RoomNow(d, clock.Now()), 0u);  // no reads while the handler is down
  EXPECT_TRUE(d.TakeReady(1, clock.Now()).empty());
  d.SetPause({});  // the handler answered
  EXPECT_EQ(Ids(d.TakeReady(1, clock.Now())), (std::vector<std::string>{"1-0"}));
}

// SPEC 3.2: an entry a keepalive found another consumer's (a lost lease) is dropped wherever it
// is: waiting, queued, or in flight when the handler refused the connection.
TEST(EntryLedger, ALostEntryIsNeverHandedOutAgain) {
  ManualClock clock;
  EntryLedger d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0", "B")});
  auto work = d.TakeReady(10, clock.Now());
  ASSERT_EQ(Ids(work), (std::vector<std::string>{"1-0", "3-0"}));
  EXPECT_EQ(d.MarkLost("3-0"), LostResult::kDropped);  // in flight: marked
  EXPECT_EQ(d.MarkLost("3-0"), LostResult::kIgnored);  // counted once
  EXPECT_EQ(d.MarkLost("2-0"), LostResult::kDropped);  // blocked: released now
  d.HandBack(work);                                    // the handler refused both in-flight POSTs
  EXPECT_EQ(d.held(), 1u);
  EXPECT_EQ(d.in_flight(), 0u);
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), std::vector<std::string>{"1-0"});
  EXPECT_EQ(d.MarkLost("9-0"), LostResult::kIgnored);  // not held
}

TEST(EntryLedger, OnlyEntriesNeverPostedSinceTheirReadAreUnposted) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")});
  auto work = d.TakeReady(2, clock.Now());  // 1-0 and 2-0 go out
  d.HandBack({&work[1], 1});                // 2-0 was refused: not a delivery
  d.ScheduleRetry(work[0], clock.Now() + Millis(60000));
  EXPECT_EQ(Sorted(d.UnpostedIds()), (std::vector<std::string>{"2-0", "3-0"}));
}

TEST(EntryLedger, PauseEndsByItself) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0")});
  d.HandBack(d.TakeReady(1, clock.Now()));
  d.SetPause({clock.Now() + Millis(30), true});
  EXPECT_EQ(d.PauseEndsAt(), clock.Now() + Millis(30));
  EXPECT_TRUE(d.TakeReady(1, clock.Now()).empty());
  clock.Advance(Millis(30));
  auto work = d.TakeReady(1, clock.Now());
  EXPECT_EQ(work.size(), 1u);
}

// A gate that lets reading go on (a rate limit) pauses delivery alone, and says until when: the
// loop's timer pumps then.
TEST(EntryLedger, ADeliveryOnlyPauseHoldsDeliveryNotReads) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0")});
  EntryLedger::Pause pause;
  pause.delivery_until = clock.Now() + Millis(50);
  d.SetPause(pause);
  EXPECT_FALSE(d.ReadPaused(clock.Now()));
  EXPECT_TRUE(d.DeliveryPaused(clock.Now()));
  EXPECT_EQ(d.PauseEndsAt(), std::nullopt) << "reading has no pause to wait out";
  EXPECT_EQ(d.DeliveryResumesAt(), clock.Now() + Millis(50));
  EXPECT_TRUE(d.HasReady());
  EXPECT_TRUE(d.TakeReady(1, clock.Now()).empty());
  clock.Advance(Millis(50));
  EXPECT_EQ(d.TakeReady(1, clock.Now()).size(), 1u);
  EXPECT_FALSE(d.HasReady());
}

TEST(EntryLedger, HealthPauseBlocksUntilLifted) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.SetPause({SteadyTime::max()});  // what the health gate says while the check fails
  EXPECT_EQ(d.PauseEndsAt(), std::nullopt) << "no timer for a pause only a verdict ends";
  d.Admit({Entry("1-0")});
  clock.Advance(Millis(20));
  EXPECT_TRUE(d.ReadPaused(clock.Now()));
  EXPECT_TRUE(d.TakeReady(1, clock.Now()).empty());
  d.SetPause({});
  EXPECT_EQ(d.TakeReady(1, clock.Now()).size(), 1u);
}

// Was StopWakesWaitingWorkers: nothing waits any more; once intake stops, nothing is handed out
// and nothing read, while what is out is still settled.
TEST(EntryLedger, StopIntakeHandsOutNothing) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0"), Entry("2-0")});
  auto out = d.TakeReady(1, clock.Now());
  ASSERT_EQ(out.size(), 1u);
  d.StopIntake();
  EXPECT_TRUE(d.intake_stopped());
  EXPECT_TRUE(d.TakeReady(1, clock.Now()).empty());
  EXPECT_EQ(d.ReadRoom(), 0u);
  EXPECT_FALSE(d.WorthReading());
  Settle(d, out[0]);
  EXPECT_EQ(d.held(), 1u);
}

// Every release of a lane's head hands the lane to the next entry, in id order, with nothing
// handed out meanwhile; once the last is released the lane is gone and the key is free again.
TEST(EntryLedger, ReleasingTheLaneHeadPassesTheLaneOnUntilItIsFree) {
  ManualClock clock;
  EntryLedger d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0", "A")});
  std::vector<std::string> order;
  for (int i = 0; i < 3; ++i) {
    auto work = d.TakeReady(10, clock.Now());
    ASSERT_EQ(work.size(), 1u) << i;
    EXPECT_TRUE(d.TakeReady(10, clock.Now()).empty()) << "the lane is busy";
    EXPECT_EQ(d.held(), static_cast<size_t>(3 - i));
    order.push_back(work[0].id);
    Settle(d, work[0]);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"1-0", "2-0", "3-0"}));
  EXPECT_EQ(d.held(), 0u);
  EXPECT_EQ(d.ReadRoom(), 10u);
  // The lane is free: a new entry with the key goes at once.
  d.Admit({Entry("4-0", "A")});
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"4-0"}));
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

// Admits what ReadRoom() allows, as intake does, until ReadRoom() says stop; returns the reads.
int FillAsTheReaderDoes(EntryLedger& d, int* next_id, uint64_t bytes) {
  int reads = 0;
  while (size_t room = d.ReadRoom()) {
    d.Admit(SizedRun(*next_id, static_cast<int>(room), bytes));
    *next_id += static_cast<int>(room);
    ++reads;
  }
  return reads;
}

TEST(EntryLedgerBytes, CountsFieldNamesAndValues) {
  ManualClock clock;
  StreamEntry e;
  e.fields = {{"ab", "cde"}, {"f", ""}, {"ab", "x"}};
  EXPECT_EQ(EntryLedger::PayloadBytes(e), 2u + 3u + 1u + 0u + 2u + 1u);
  EntryLedger d(10, "", 1000);
  d.Admit({e});
  EXPECT_EQ(d.held_bytes(), 9u);
  auto work = d.TakeReady(1, clock.Now());
  Settle(d, work[0]);
  EXPECT_EQ(d.held_bytes(), 0u);
}

TEST(EntryLedgerBytes, FirstReadIsAQuarterOfTheCapacityUntilASizeIsKnown) {
  EntryLedger d(64, "", 32 << 20);
  EXPECT_EQ(d.ReadRoom(), 16u);  // nothing known about entry sizes yet: one round of the workers
  d.Admit({Sized("1-0", 1 << 20)});
  // 1 MiB entries: a read brings a quarter of the 32 MiB budget at most.
  EXPECT_EQ(d.ReadRoom(), 8u);
}

TEST(EntryLedgerBytes, HeldBytesNeverExceedTheBudgetForSteadySizes) {
  ManualClock clock;
  const uint64_t budget = 32 << 20;
  EntryLedger d(64, "", budget);
  int next = 1;
  FillAsTheReaderDoes(d, &next, 1 << 20);
  EXPECT_LE(d.held_bytes(), budget);
  EXPECT_GE(d.held_bytes(), budget - (1 << 20));  // and the budget is used, not wasted
  EXPECT_EQ(d.held(), 32u);                       // not the 64 the entry capacity allows
  // Releasing one entry makes room for exactly one more.
  auto work = d.TakeReady(1, clock.Now());
  Settle(d, work[0]);
  EXPECT_EQ(d.ReadRoom(), 1u);
  d.Admit(SizedRun(next++, 1, 1 << 20));
  EXPECT_EQ(d.ReadRoom(), 0u);
  EXPECT_LE(d.held_bytes(), budget);
}

TEST(EntryLedgerBytes, SmallEntriesAreBoundedByTheEntryCapacity) {
  EntryLedger d(64, "", 32 << 20);
  int next = 1;
  FillAsTheReaderDoes(d, &next, 100);
  EXPECT_EQ(d.held(), 64u);
  EXPECT_EQ(d.held_bytes(), 6400u);
}

TEST(EntryLedgerBytes, AnEntryLargerThanTheBudgetIsTakenAlone) {
  ManualClock clock;
  const uint64_t budget = 1 << 20;
  EntryLedger d(64, "", budget);
  int next = 1;
  d.Admit(SizedRun(next++, 1, 100));
  d.Admit(SizedRun(next++, 1, 3 << 20));  // larger than the whole budget
  EXPECT_EQ(d.ReadRoom(), 0u);            // nothing more while anything is held
  auto work = d.TakeReady(10, clock.Now());
  ASSERT_EQ(work.size(), 2u);
  Settle(d, work[0]);
  EXPECT_EQ(d.ReadRoom(), 0u);  // the huge one is still held
  EXPECT_EQ(RoomNow(d, clock.Now()), 0u);
  Settle(d, work[1]);
  EXPECT_EQ(d.ReadRoom(), 1u);  // nothing held: one more, alone, however large
  EXPECT_EQ(RoomNow(d, clock.Now()), 1u);
  d.Admit(SizedRun(next++, 1, 3 << 20));
  EXPECT_EQ(d.ReadRoom(), 0u);
}

TEST(EntryLedgerBytes, EntriesOverAQuarterOfTheBudgetAreReadOneAtATimeWhileTheyFit) {
  const uint64_t budget = 32 << 20;
  EntryLedger d(64, "", budget);
  int next = 1;
  d.Admit(SizedRun(next++, 1, 10 << 20));
  EXPECT_EQ(d.ReadRoom(), 1u);  // 22 MiB free: two would fit, but a read takes one this large
  d.Admit(SizedRun(next++, 1, 10 << 20));
  EXPECT_EQ(d.ReadRoom(), 1u);
  d.Admit(SizedRun(next++, 1, 10 << 20));
  EXPECT_EQ(d.ReadRoom(), 0u);  // 30 MiB held, 2 MiB free
  EXPECT_LE(d.held_bytes(), budget);
}

TEST(EntryLedgerBytes, NoReadWhileTheRecentSizeDoesNotFit) {
  const uint64_t budget = 10 << 20;
  EntryLedger d(64, "", budget);
  int next = 1;
  d.Admit(SizedRun(next, 1, 4 << 20));  // a 4 MiB entry, then small ones
  next += 1;
  d.Admit(SizedRun(next, 3, 1 << 20));
  next += 3;
  // 7 MiB held, 3 MiB free, and entries of up to 4 MiB were seen lately: no read.
  EXPECT_EQ(d.held_bytes(), uint64_t{7} << 20);
  EXPECT_EQ(d.ReadRoom(), 0u);
}

TEST(EntryLedgerBytes, TheEstimateForgetsAnOldLargeEntry) {
  ManualClock clock;
  const uint64_t budget = 8 << 20;
  EntryLedger d(1000, "", budget);
  d.Admit({Sized("1-0", 4 << 20)});
  auto work = d.TakeReady(1, clock.Now());
  Settle(d, work[0]);
  EXPECT_EQ(d.ReadRoom(), 1u);  // budget/4 = 2 MiB < 4 MiB: one at a time while it is recent
  int next = 2;
  for (size_t i = 0; i < EntryLedger::kSizeWindow; ++i) {
    d.Admit(SizedRun(next++, 1, 1024));
    auto w = d.TakeReady(1, clock.Now());
    Settle(d, w[0]);
  }
  // The 4 MiB entry left the window: reads are sized for 1 KiB entries again.
  EXPECT_EQ(d.ReadRoom(), std::min<size_t>(1000, (budget / 4) / 1024));
}

TEST(EntryLedgerBytes, WorkersIdleMakesASmallReadWorthIt) {
  ManualClock clock;
  EntryLedger d(64, "", 32 << 20);
  int next = 1;
  FillAsTheReaderDoes(d, &next, 1 << 20);
  auto work = d.TakeReady(64, clock.Now());  // every held entry is in flight: nothing queued
  Settle(d, work[0]);
  EXPECT_EQ(RoomNow(d, clock.Now()), 1u);
}

TEST(EntryLedgerBytes, WithoutAByteLimitOnlyEntriesCount) {
  EntryLedger d(4, "");
  d.Admit({Sized("1-0", 8 << 20)});
  EXPECT_EQ(d.ReadRoom(), 3u);
}

// ---- The deliberate change, refs, and the entries admitted only to be settled. ----

// A 2xx frees the payload bytes and the ordering key at once, but the entry keeps its room until
// Redis confirmed the XACK: the pending list never holds more than there is room for (SPEC 4.2).
TEST(EntryLedger, AcceptKeepsRoomUntilTheAckIsConfirmed) {
  ManualClock clock;
  EntryLedger d(2, "account", 1 << 20);
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A")});
  const uint64_t second_bytes = EntryLedger::PayloadBytes(Entry("2-0", "A"));
  EXPECT_EQ(d.ReadRoom(), 0u);
  auto first = d.TakeReady(10, clock.Now());
  ASSERT_EQ(Ids(first), (std::vector<std::string>{"1-0"}));
  ASSERT_EQ(d.Accept(first[0]), Applied::kApplied);
  EXPECT_EQ(d.StateOf("1-0"), EntryState::kAcking);
  EXPECT_EQ(d.acking(), 1u);
  EXPECT_EQ(d.ReadRoom(), 0u) << "the room is kept until the XACK is confirmed";
  EXPECT_EQ(d.held(), 2u);
  EXPECT_TRUE(d.Holds("1-0"));
  EXPECT_EQ(d.held_bytes(), second_bytes) << "the payload is freed at once";
  EXPECT_TRUE(d.Entry(first[0])->fields.empty());
  EXPECT_EQ(d.Admit({Entry("1-0", "A")}), 0u) << "read again while its XACK is pending: skipped";
  EXPECT_EQ(d.KeepAliveIds(), std::vector<std::string>{"2-0"});
  EXPECT_EQ(d.in_flight(), 0u);
  // The lane is free at once: the next entry with the key goes without waiting for the XACK.
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"2-0"}));
  EXPECT_TRUE(d.AckConfirmed("1-0"));
  EXPECT_FALSE(d.Holds("1-0"));
  EXPECT_EQ(d.acking(), 0u);
  EXPECT_EQ(d.ReadRoom(), 1u);
  EXPECT_FALSE(d.AckConfirmed("1-0")) << "confirmed twice: not held any more, ignored";
}

TEST(EntryLedger, AStaleRefIsIgnored) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0"), Entry("2-0")});
  // Handed back and out again: the first hand-out's ref is stale.
  auto out = d.TakeReady(1, clock.Now());
  ASSERT_EQ(out.size(), 1u);
  const EntryRef old = out[0];
  d.HandBack(out);
  auto again = d.TakeReady(1, clock.Now());
  ASSERT_EQ(Ids(again), std::vector<std::string>{"1-0"});
  EXPECT_NE(again[0].generation, old.generation);
  EXPECT_EQ(d.Entry(old), nullptr);
  EXPECT_NE(d.Entry(again[0]), nullptr);
  EXPECT_EQ(d.Accept(old), Applied::kStale);
  EXPECT_EQ(d.ScheduleRetry(old, clock.Now()), Applied::kStale);
  EXPECT_EQ(d.DeadLetter(old), Applied::kStale);
  d.HandBack({&old, 1});
  EXPECT_EQ(d.StateOf("1-0"), EntryState::kInFlight);
  EXPECT_EQ(d.in_flight(), 1u);
  // Let go (a lost lease) and read again under the same id: the old delivery's ref is stale.
  auto second = d.TakeReady(1, clock.Now());
  ASSERT_EQ(Ids(second), std::vector<std::string>{"2-0"});
  ASSERT_EQ(d.MarkLost("2-0"), LostResult::kDropped);
  ASSERT_EQ(d.ScheduleRetry(second[0], clock.Now()), Applied::kLetGo);
  ASSERT_EQ(d.Admit({Entry("2-0")}), 1u);
  EXPECT_EQ(d.Accept(second[0]), Applied::kStale);
  EXPECT_EQ(d.Entry(second[0]), nullptr);
  EXPECT_FALSE(d.Lost(second[0]));
  EXPECT_EQ(d.StateOf("2-0"), EntryState::kQueued);
  // The current refs still work.
  EXPECT_EQ(d.Accept(again[0]), Applied::kApplied);
}

// An entry exhausted on arrival (attempts > max_attempts) is held, with its room and bytes, while
// it is dead-lettered: a reclaim beat cannot run through a dead peer's whole pending list of
// them (m6), and it is never delivered.
TEST(EntryLedger, ExhaustedEntriesTakeRoom) {
  ManualClock clock;
  EntryLedger d(4, "account");
  StreamEntry exhausted = Entry("1-0", "A");
  exhausted.attempts = 6;
  const uint64_t bytes = EntryLedger::PayloadBytes(exhausted);
  EXPECT_EQ(d.AdmitForDeadLetter(exhausted), 1u);
  EXPECT_EQ(d.AdmitForDeadLetter(exhausted), 0u) << "held already";
  EXPECT_EQ(d.Admit({exhausted}), 0u) << "held already";
  EXPECT_EQ(d.held(), 1u);
  EXPECT_EQ(d.held_bytes(), bytes);
  EXPECT_EQ(d.ReadRoom(), 3u);
  EXPECT_EQ(d.StateOf("1-0"), EntryState::kDeadLettering);
  EXPECT_EQ(d.Find("1-0")->attempts, 6);
  EXPECT_TRUE(d.TakeReady(10, clock.Now()).empty()) << "never delivered";
  EXPECT_EQ(d.KeepAliveIds(), std::vector<std::string>{"1-0"}) << "its lease is kept";
  EXPECT_TRUE(d.UnpostedIds().empty());
  // It takes no lane: a later entry with its key is delivered.
  d.Admit({Entry("2-0", "A")});
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), std::vector<std::string>{"2-0"});
  EXPECT_TRUE(d.Release("1-0"));  // written to the dead-letter stream
  EXPECT_EQ(d.held(), 1u);
  EXPECT_EQ(d.ReadRoom(), 3u);
}

TEST(EntryLedger, EntriesWhosePayloadIsGoneTakeRoomUntilAcknowledged) {
  ManualClock clock;
  EntryLedger d(2, "");
  EXPECT_EQ(d.AdmitForAck("1-0"), 1u);
  EXPECT_EQ(d.AdmitForAck("1-0"), 0u);
  EXPECT_EQ(d.StateOf("1-0"), EntryState::kAcking);
  EXPECT_EQ(d.acking(), 1u);
  EXPECT_EQ(d.ReadRoom(), 1u);
  EXPECT_EQ(d.held_bytes(), 0u);
  EXPECT_TRUE(d.TakeReady(10, clock.Now()).empty());
  EXPECT_TRUE(d.KeepAliveIds().empty());
  EXPECT_TRUE(d.UnpostedIds().empty());
  EXPECT_EQ(d.Admit({Entry("1-0")}), 0u);
  EXPECT_TRUE(d.AckConfirmed("1-0"));
  EXPECT_EQ(d.ReadRoom(), 2u);
}

// ---- Every valid transition of the state table. ----

TEST(EntryLedgerTransitions, AdmitQueuesOrBlocksBehindItsKey) {
  EntryLedger d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0")});
  EXPECT_EQ(d.StateOf("1-0"), EntryState::kQueued);
  EXPECT_EQ(d.StateOf("2-0"), EntryState::kBlocked);
  EXPECT_EQ(d.StateOf("3-0"), EntryState::kQueued);
  EXPECT_EQ(d.StateOf("9-0"), std::nullopt);
  EXPECT_EQ(Sorted(d.UnpostedIds()), (std::vector<std::string>{"1-0", "2-0", "3-0"}));
}

TEST(EntryLedgerTransitions, TakeReadyPutsInFlightAndPosted) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0")});
  auto out = d.TakeReady(1, clock.Now());
  EXPECT_EQ(d.StateOf("1-0"), EntryState::kInFlight);
  EXPECT_EQ(d.in_flight(), 1u);
  EXPECT_TRUE(d.UnpostedIds().empty());
  ASSERT_NE(d.Entry(out[0]), nullptr);
  EXPECT_EQ(d.Entry(out[0])->id, "1-0");
}

TEST(EntryLedgerTransitions, ABlockedEntryIsQueuedWhenItsLaneFrees) {
  ManualClock clock;
  EntryLedger d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A")});
  auto out = d.TakeReady(10, clock.Now());
  EXPECT_EQ(d.StateOf("2-0"), EntryState::kBlocked);
  ASSERT_EQ(d.DeadLetter(out[0]), Applied::kApplied);
  EXPECT_EQ(d.StateOf("2-0"), EntryState::kBlocked) << "a pending dead letter holds the key";
  ASSERT_TRUE(d.Release("1-0"));
  EXPECT_EQ(d.StateOf("2-0"), EntryState::kQueued);
}

TEST(EntryLedgerTransitions, ScheduleRetryWaitsAndHoldsTheLane) {
  ManualClock clock;
  EntryLedger d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A")});
  auto out = d.TakeReady(10, clock.Now());
  ASSERT_EQ(d.ScheduleRetry(out[0], clock.Now() + Millis(100)), Applied::kApplied);
  EXPECT_EQ(d.StateOf("1-0"), EntryState::kWaitingRetry);
  EXPECT_EQ(d.in_flight(), 0u);
  EXPECT_EQ(d.NextRetryAt(), clock.Now() + Millis(100));
  EXPECT_TRUE(d.TakeReady(10, clock.Now()).empty());
  EXPECT_EQ(d.StateOf("2-0"), EntryState::kBlocked);
}

// SPEC 3.5: a retry holds back later entries with its key, also when its claim was ambiguous
// (sent, no answer): the entry is let go, but its lane waits for the recovery re-read.
TEST(EntryLedgerTransitions, AnAmbiguouslyReleasedRetryKeepsItsLaneUntilItComesBack) {
  ManualClock clock;
  EntryLedger d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0", "B")});
  auto out = d.TakeReady(10, clock.Now());
  ASSERT_EQ(Ids(out), (std::vector<std::string>{"1-0", "3-0"}));
  ASSERT_EQ(d.ScheduleRetry(out[0], clock.Now()), Applied::kApplied);
  ASSERT_EQ(d.TakeDueRetries(clock.Now()), (std::vector<std::string>{"1-0"}));
  ASSERT_TRUE(d.ReleaseKeepingLane("1-0"));
  EXPECT_FALSE(d.Holds("1-0"));
  EXPECT_EQ(d.held(), 2u) << "its room is free";
  EXPECT_TRUE(d.has_kept_lanes());
  EXPECT_TRUE(d.TakeReady(10, clock.Now()).empty()) << "2-0 overtook the retry of 1-0";
  EXPECT_EQ(d.StateOf("2-0"), EntryState::kBlocked);
  d.Admit({Entry("4-0", "A")});
  EXPECT_EQ(d.StateOf("4-0"), EntryState::kBlocked);

  // The recovery brings it back: it takes its lane and goes first; the others follow in order.
  ASSERT_EQ(d.Admit({Entry("1-0", "A")}), 1u);
  EXPECT_FALSE(d.has_kept_lanes());
  auto again = d.TakeReady(10, clock.Now());
  ASSERT_EQ(Ids(again), (std::vector<std::string>{"1-0"}));
  Settle(d, again[0]);
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"2-0"}));
}

// The recovery did not find it (the claim was applied after all and a peer took it, or the dead
// letter was written): the lane goes on.
TEST(EntryLedgerTransitions, KeptLanesGoOnWhenTheRecoveryDoesNotBringTheEntryBack) {
  ManualClock clock;
  EntryLedger d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("5-0", "C")});
  auto out = d.TakeReady(10, clock.Now());
  ASSERT_EQ(d.DeadLetter(out[0]), Applied::kApplied);
  ASSERT_EQ(d.DeadLetter(out[1]), Applied::kApplied);
  ASSERT_TRUE(d.ReleaseKeepingLane("1-0"));
  ASSERT_TRUE(d.ReleaseKeepingLane("5-0"));
  EXPECT_TRUE(d.TakeReady(10, clock.Now()).empty());
  d.ReleaseKeptLanes(d.kept_sequence());
  EXPECT_FALSE(d.has_kept_lanes());
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"2-0"}));
  // Key C had nothing waiting: its lane is gone, a new entry with it is ready at once.
  d.Admit({Entry("6-0", "C")});
  EXPECT_EQ(d.StateOf("6-0"), EntryState::kQueued);
  // An entry without a key: the same as Release.
  EntryLedger plain(10, "");
  plain.Admit({Entry("7-0")});
  auto p = plain.TakeReady(10, clock.Now());
  ASSERT_EQ(plain.DeadLetter(p[0]), Applied::kApplied);
  ASSERT_TRUE(plain.ReleaseKeepingLane("7-0"));
  EXPECT_FALSE(plain.has_kept_lanes());
}

// A recovery re-read that began before a lane was kept may already have passed its entry: it
// releases only the lanes kept before it began.
TEST(EntryLedgerTransitions, ARecoveryReleasesOnlyTheLanesKeptBeforeItBegan) {
  ManualClock clock;
  EntryLedger d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0", "B"), Entry("4-0", "B")});
  auto out = d.TakeReady(10, clock.Now());
  ASSERT_EQ(Ids(out), (std::vector<std::string>{"1-0", "3-0"}));
  ASSERT_EQ(d.DeadLetter(out[0]), Applied::kApplied);
  ASSERT_EQ(d.DeadLetter(out[1]), Applied::kApplied);
  ASSERT_TRUE(d.ReleaseKeepingLane("1-0"));
  const uint64_t began = d.kept_sequence();  // a re-read begins here
  ASSERT_TRUE(d.ReleaseKeepingLane("3-0"));
  EXPECT_EQ(d.kept_lanes(), 2u);
  d.ReleaseKeptLanes(began);
  EXPECT_EQ(d.kept_lanes(), 1u);
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"2-0"}))
      << "B's lane was kept after the re-read began: 4-0 must wait for the next one";
  d.ReleaseKeptLanes(d.kept_sequence());
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"4-0"}));
}

TEST(EntryLedgerTransitions, DueRetriesAreClaimedInDueOrder) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")});
  auto out = d.TakeReady(10, clock.Now());
  d.ScheduleRetry(out[0], clock.Now() + Millis(30));
  d.ScheduleRetry(out[1], clock.Now() + Millis(10));
  d.ScheduleRetry(out[2], clock.Now() + Millis(50));
  clock.Advance(Millis(30));
  EXPECT_EQ(d.TakeDueRetries(clock.Now()), (std::vector<std::string>{"2-0", "1-0"}));
  EXPECT_EQ(d.StateOf("1-0"), EntryState::kClaiming);
  EXPECT_EQ(d.StateOf("2-0"), EntryState::kClaiming);
  EXPECT_EQ(d.StateOf("3-0"), EntryState::kWaitingRetry);
  EXPECT_EQ(d.NextRetryAt(), clock.Now() + Millis(20));
}

TEST(EntryLedgerTransitions, RetryClaimedGoesToTheFrontWithItsAttempts) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0"), Entry("2-0")});
  auto out = d.TakeReady(1, clock.Now());
  d.ScheduleRetry(out[0], clock.Now());
  ASSERT_EQ(d.TakeDueRetries(clock.Now()), std::vector<std::string>{"1-0"});
  ASSERT_TRUE(d.RetryClaimed("1-0", 3));
  EXPECT_EQ(d.StateOf("1-0"), EntryState::kQueued);
  EXPECT_EQ(Sorted(d.UnpostedIds()), (std::vector<std::string>{"1-0", "2-0"}));
  auto again = d.TakeReady(1, clock.Now());
  ASSERT_EQ(Ids(again), std::vector<std::string>{"1-0"});
  EXPECT_EQ(d.Entry(again[0])->attempts, 3);
}

TEST(EntryLedgerTransitions, RetryNotClaimedWaitsAgain) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0")});
  auto out = d.TakeReady(1, clock.Now());
  d.ScheduleRetry(out[0], clock.Now());
  ASSERT_EQ(d.TakeDueRetries(clock.Now()).size(), 1u);
  ASSERT_TRUE(d.RetryNotClaimed("1-0", clock.Now() + Millis(100)));
  EXPECT_EQ(d.StateOf("1-0"), EntryState::kWaitingRetry);
  EXPECT_EQ(d.NextRetryAt(), clock.Now() + Millis(100));
  EXPECT_TRUE(d.TakeDueRetries(clock.Now()).empty());
}

TEST(EntryLedgerTransitions, RetryClaimedGoneIsAcknowledgedAndFreesTheLane) {
  ManualClock clock;
  EntryLedger d(10, "account", 1 << 20);
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A")});
  auto out = d.TakeReady(10, clock.Now());
  d.ScheduleRetry(out[0], clock.Now());
  ASSERT_EQ(d.TakeDueRetries(clock.Now()).size(), 1u);
  ASSERT_TRUE(d.RetryClaimedGone("1-0"));
  EXPECT_EQ(d.StateOf("1-0"), EntryState::kAcking);
  EXPECT_EQ(d.acking(), 1u);
  EXPECT_EQ(d.held_bytes(), EntryLedger::PayloadBytes(Entry("2-0", "A")));
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), std::vector<std::string>{"2-0"});
  EXPECT_EQ(d.held(), 2u);
  EXPECT_TRUE(d.AckConfirmed("1-0"));
  EXPECT_EQ(d.held(), 1u);
}

TEST(EntryLedgerTransitions, HandBackQueuesAtTheFrontInOrderUnposted) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")});
  auto out = d.TakeReady(2, clock.Now());
  d.HandBack(out);
  EXPECT_EQ(d.StateOf("1-0"), EntryState::kQueued);
  EXPECT_EQ(d.in_flight(), 0u);
  EXPECT_EQ(Sorted(d.UnpostedIds()), (std::vector<std::string>{"1-0", "2-0", "3-0"}));
  // The refused-connect gate's pause once it has ended: delivery goes on, reading waits while
  // anything is held (the held entries try the handler again).
  d.SetPause({clock.Now(), /*reads_wait_while_held=*/true});
  EXPECT_TRUE(d.ReadPaused(clock.Now())) << "no reads until the handler answers";
  EXPECT_FALSE(d.DeliveryPaused(clock.Now())) << "the pause ended at once";
  EXPECT_EQ(Ids(d.TakeReady(10, clock.Now())), (std::vector<std::string>{"1-0", "2-0", "3-0"}));
}

TEST(EntryLedgerTransitions, ReleaseLetsGoFromEverySettlingState) {
  ManualClock clock;
  EntryLedger d(10, "");
  d.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")});
  auto out = d.TakeReady(10, clock.Now());
  d.DeadLetter(out[0]);
  d.Accept(out[1]);
  d.ScheduleRetry(out[2], clock.Now());
  d.TakeDueRetries(clock.Now());
  EXPECT_TRUE(d.Release("1-0"));  // kDeadLettering
  EXPECT_EQ(d.acking(), 1u);
  EXPECT_TRUE(d.Release("2-0"));  // kAcking (an ambiguous settlement)
  EXPECT_EQ(d.acking(), 0u);
  EXPECT_TRUE(d.Release("3-0"));  // kClaiming (lost lease)
  EXPECT_EQ(d.held(), 0u);
  EXPECT_EQ(d.ReadRoom(), 10u);
  EXPECT_FALSE(d.Release("1-0")) << "not held: ignored";
}

TEST(EntryLedgerTransitions, MarkLostActsPerState) {
  ManualClock clock;
  EntryLedger d(10, "account");
  d.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0"), Entry("4-0"), Entry("5-0"),
           Entry("6-0"), Entry("7-0"), Entry("8-0")});
  auto out = d.TakeReady(6, clock.Now());  // 1-0 3-0 4-0 5-0 6-0 7-0
  ASSERT_EQ(Ids(out), (std::vector<std::string>{"1-0", "3-0", "4-0", "5-0", "6-0", "7-0"}));
  d.ScheduleRetry(out[1], clock.Now() + Millis(100));  // 3-0 waits
  d.ScheduleRetry(out[2], clock.Now());                // 4-0 claiming
  ASSERT_EQ(d.TakeDueRetries(clock.Now()), std::vector<std::string>{"4-0"});
  d.DeadLetter(out[3]);  // 5-0 dead-lettering
  d.Accept(out[4]);      // 6-0 acking
  // Queued, blocked, waiting: let go now.
  EXPECT_EQ(d.MarkLost("8-0"), LostResult::kDropped);
  EXPECT_EQ(d.MarkLost("2-0"), LostResult::kDropped);
  EXPECT_EQ(d.MarkLost("3-0"), LostResult::kDropped);
  EXPECT_FALSE(d.Holds("8-0"));
  EXPECT_FALSE(d.Holds("2-0"));
  EXPECT_FALSE(d.Holds("3-0"));
  EXPECT_EQ(d.NextRetryAt(), std::nullopt);
  // Settling: left to its own owner-checked step.
  EXPECT_EQ(d.MarkLost("4-0"), LostResult::kIgnored);
  EXPECT_EQ(d.MarkLost("5-0"), LostResult::kIgnored);
  EXPECT_EQ(d.MarkLost("6-0"), LostResult::kIgnored);
  EXPECT_TRUE(d.Holds("4-0"));
  EXPECT_TRUE(d.Holds("5-0"));
  EXPECT_TRUE(d.Holds("6-0"));
  // In flight: marked; only a 2xx still counts.
  EXPECT_EQ(d.MarkLost("1-0"), LostResult::kDropped);
  EXPECT_EQ(d.MarkLost("7-0"), LostResult::kDropped);
  EXPECT_TRUE(d.Lost(out[0]));
  EXPECT_EQ(d.DeadLetter(out[0]), Applied::kLetGo);
  EXPECT_FALSE(d.Holds("1-0"));
  EXPECT_EQ(d.Accept(out[5]), Applied::kApplied);
  EXPECT_EQ(d.StateOf("7-0"), EntryState::kAcking);
  EXPECT_EQ(d.in_flight(), 0u);
}

TEST(EntryLedgerTransitions, SettlementOfAnIdNotHeldIsIgnored) {
  ManualClock clock;
  EntryLedger d(10, "");
  EXPECT_FALSE(d.AckConfirmed("1-0"));
  EXPECT_FALSE(d.RetryClaimed("1-0", 2));
  EXPECT_FALSE(d.RetryNotClaimed("1-0", clock.Now()));
  EXPECT_FALSE(d.RetryClaimedGone("1-0"));
  EXPECT_FALSE(d.Release("1-0"));
  EXPECT_EQ(d.held(), 0u);
}

// ---- Invalid transitions: fatal where SC_DCHECK is (debug, sanitizers); skipped and logged once
// elsewhere. Both modes run in every build. ----

class EntryLedgerInvalid : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    clock_.Advance(Millis(1));
    d_.Admit({Entry("1-0", "A"), Entry("2-0", "A"), Entry("3-0"), Entry("4-0")});
    out_ = d_.TakeReady(10, clock_.Now());  // 1-0 3-0 4-0
    d_.HandBack({&out_[1], 1});             // 3-0 queued again, its ref still current
    d_.ScheduleRetry(out_[2], clock_.Now() + Millis(100));  // 4-0 waiting
  }
  const EntryRef& in_flight() const { return out_[0]; }  // 1-0
  const EntryRef& queued() const { return out_[1]; }     // 3-0

  // Runs `step` with checks fatal: it must die with the check's message.
  template <typename Step>
  static void ExpectFatal(Step step) {
    EXPECT_DEATH(
        {
          check_internal::SetFatalForTesting(true);
          step();
        },
        "internal check failed");
  }

  ManualClock clock_;
  EntryLedger d_{10, "account"};
  std::vector<EntryRef> out_;
};

TEST_F(EntryLedgerInvalid, ResultsOfAnEntryNotInFlightAreFatal) {
  ExpectFatal([&] { d_.Accept(queued()); });
  ExpectFatal([&] { d_.ScheduleRetry(queued(), clock_.Now()); });
  ExpectFatal([&] { d_.DeadLetter(queued()); });
  ExpectFatal([&] { d_.HandBack({&queued(), 1}); });
}

TEST_F(EntryLedgerInvalid, SettlementOfAnEntryInTheWrongStateIsFatal) {
  ExpectFatal([&] { d_.AckConfirmed("1-0"); });         // in flight
  ExpectFatal([&] { d_.RetryClaimed("4-0", 2); });      // waiting, not claiming
  ExpectFatal([&] { d_.RetryNotClaimed("3-0", {}); });  // queued
  ExpectFatal([&] { d_.RetryClaimedGone("1-0"); });     // in flight
  ExpectFatal([&] { d_.Release("1-0"); });              // in flight: its ref ends it
  ExpectFatal([&] { d_.Release("3-0"); });              // queued
  ExpectFatal([&] { d_.Release("2-0"); });              // blocked
  ExpectFatal([&] { d_.Release("4-0"); });              // waiting
}

TEST_F(EntryLedgerInvalid, NotFatalTheyAreSkippedAndLoggedOncePerCheck) {
  const bool fatal = DchecksAreFatal();
  check_internal::SetFatalForTesting(false);
  std::vector<std::string> lines;
  SetLogSinkForTest([&](std::string_view line) { lines.emplace_back(line); });
  // Two seconds apart, past the log's own repeat limit: "once" is the check's doing.
  ManualClock log_clock;
  SetLogClockForTest(&log_clock);
  EXPECT_EQ(d_.Accept(queued()), Applied::kStale);
  log_clock.Advance(Millis(2000));
  EXPECT_EQ(d_.Accept(queued()), Applied::kStale);
  EXPECT_FALSE(d_.Release("4-0"));
  EXPECT_FALSE(d_.AckConfirmed("1-0"));
  SetLogClockForTest(nullptr);
  SetLogSinkForTest(nullptr);
  check_internal::SetFatalForTesting(fatal);
  EXPECT_EQ(d_.StateOf("3-0"), EntryState::kQueued);
  EXPECT_EQ(d_.StateOf("4-0"), EntryState::kWaitingRetry);
  EXPECT_EQ(d_.StateOf("1-0"), EntryState::kInFlight);
  EXPECT_EQ(d_.held(), 4u);
  EXPECT_EQ(d_.in_flight(), 1u);
  ASSERT_EQ(lines.size(), 3u) << "once per check: Accept twice logs one line";
  EXPECT_NE(lines[0].find("internal check failed"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("Accept of 3-0 in state queued"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace streamcar::runtime
