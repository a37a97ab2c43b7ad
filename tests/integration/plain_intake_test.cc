// The reading half of a plain subscription on the event loop against a real redis-server: setup
// and its fatal checks, the own-PEL drain first, reads bounded by the ledger's room, NOGROUP, the
// reclaim beat, the recovery re-read after a lost connection, and the stop that ends a BLOCK read.

#include "sidecar/runtime/plain_intake.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/integration/intake_harness.h"
#include "tests/support/redis_monitor.h"
#include "tests/support/redis_server.h"

namespace streamcar::runtime {
namespace {

using namespace intake_testing;  // NOLINT: the harness and its helpers
using testing::RedisMonitor;
using testing::RedisServer;

TEST(PlainIntake, DrainsOwnPendingFirstWithTheirDeliveryCounts) {
  RedisServer server;
  server.Run({"XGROUP", "CREATE", "orders", "g", "0", "MKSTREAM"});
  const std::string a = Add(server, "a");
  const std::string b = Add(server, "b");
  // A previous life of this consumer read them (one delivery each) and died.
  server.Run({"XREADGROUP", "GROUP", "g", "c1", "COUNT", "10", "STREAMS", "orders", ">"});
  const std::string c = Add(server, "c");  // never read

  Harness h(server);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 3; }));
  EXPECT_EQ(h.group_ready_, 1);
  EXPECT_EQ(h.ack_mode_, redis::AckMode::kAckOnly);
  EXPECT_TRUE(h.source().drained());
  // The drain read each once more: attempts 2, counted by Redis.
  EXPECT_EQ(h.ledger().Find(a)->attempts, 2);
  EXPECT_EQ(h.ledger().Find(b)->attempts, 2);
  EXPECT_EQ(h.ledger().Find(c)->attempts, 1);
  EXPECT_EQ(Pending(server, a).count, 2);
  // Own pending entries first, then new ones.
  std::vector<std::string> order;
  for (const EntryRef& ref : h.ledger().TakeReady(10, h.loop_->clock().Now())) {
    order.push_back(ref.id);
  }
  EXPECT_EQ(order, (std::vector<std::string>{a, b, c}));
}

TEST(PlainIntake, ReadsNoMoreThanThereIsRoomAndGoesOnWhenPoked) {
  RedisServer server;
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Add(server, std::to_string(i)));
  Harness h(server, /*capacity=*/4);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 4; }));
  // Out of room: no read is outstanding and none starts, however long the loop runs.
  ASSERT_TRUE(h.RunUntil([&] { return !h.source().reading(); }));
  h.RunFor(Millis(200));
  EXPECT_FALSE(h.source().reading());
  EXPECT_EQ(PendingCount(server), 4) << "read beyond the room";

  // Room freed: nothing is read until the loop pokes the intake.
  h.Settle(server, 3);
  EXPECT_EQ(h.ledger().held(), 1u);
  h.source().Poke();
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 4; }));
  ASSERT_TRUE(h.RunUntil([&] { return !h.source().reading(); }));
  EXPECT_EQ(PendingCount(server), 4);
  h.Settle(server, 4);
  h.source().Poke();
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 3; }));
  EXPECT_EQ(server.Run({"XINFO", "GROUPS", "orders"}).view()[0][7].Str(), ids.back())
      << "every entry was read";
}

// The read linger (runtime/tuning.h): a read that brought fewer entries than it asked for makes
// the next one wait, so that it brings what arrived meanwhile in one reply.
TEST(PlainIntake, AShortReadMakesTheNextReadLinger) {
  RedisServer server;
  server.Run({"XGROUP", "CREATE", "orders", "g", "$", "MKSTREAM"});
  Harness h(server);
  h.source().SetReadLinger(Millis(400));
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && Blocked(server); }));
  // Before the read that starts the linger: however late this thread runs after it, the next
  // read cannot come sooner than 400 ms after this.
  const SteadyTime first = SteadyClock::now();
  Add(server, "a");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 1; }));
  EXPECT_EQ(h.admitted_, 1);
  Add(server, "b");
  Add(server, "c");
  h.RunFor(Millis(150));
  if (SteadyClock::now() - first < Millis(350)) {  // a loaded machine may have slept past it
    EXPECT_EQ(h.ledger().held(), 1u) << "read again before the linger ended";
    EXPECT_FALSE(h.source().reading());
  }
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 3; }));
  EXPECT_GE(SteadyClock::now() - first, Millis(400));
  EXPECT_EQ(h.admitted_, 2) << "b and c came in one read";
}

// A read that brought all it asked for does not linger: more is waiting in the stream.
TEST(PlainIntake, AFullReadDoesNotLinger) {
  RedisServer server;
  for (int i = 0; i < 10; ++i) Add(server, std::to_string(i));
  Harness h(server, /*capacity=*/4);
  h.source().SetReadLinger(Millis(60000));
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 4; }));
  ASSERT_TRUE(h.RunUntil([&] { return !h.source().reading(); }));
  h.Settle(server, 4);
  h.source().Poke();
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 4; }, Millis(10000)));
}

TEST(PlainIntake, APendingEntryWhosePayloadIsGoneIsAcknowledgedNotAdmitted) {
  RedisServer server;
  server.Run({"XGROUP", "CREATE", "orders", "g", "0", "MKSTREAM"});
  const std::string gone = Add(server, "gone");
  const std::string kept = Add(server, "kept");
  server.Run({"XREADGROUP", "GROUP", "g", "c1", "COUNT", "10", "STREAMS", "orders", ">"});
  server.Run({"XDEL", "orders", gone});

  Harness h(server);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && h.ledger().held() == 2; }));
  EXPECT_EQ(h.acks_, (std::vector<std::string>{gone}));
  EXPECT_EQ(h.ledger().StateOf(gone), EntryState::kAcking);
  EXPECT_EQ(h.ledger().StateOf(kept), EntryState::kQueued);
  const auto ready = h.ledger().TakeReady(10, h.loop_->clock().Now());
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].id, kept);
}

TEST(PlainIntake, AGroupDeletedWithItsStreamIsCreatedAgainAtZero) {
  RedisServer server;
  Harness h(server);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && h.source().reading(); }));
  server.Run({"DEL", "orders"});
  // Written after the deletion, before or after the group is back: read either way (group at 0).
  const std::string id = Add(server, "after");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().Holds(id); }));
  redis::Reply groups = server.Run({"XINFO", "GROUPS", "orders"});
  ASSERT_EQ(groups.view().Size(), 1u);
  EXPECT_EQ(groups.view()[0][1].Str(), "g");
  EXPECT_FALSE(h.fatal_.has_value());
}

TEST(PlainIntake, NogroupMetByTheSettlementCreatesTheGroupAgainEvenWithoutRoom) {
  RedisServer server;
  Harness h(server, /*capacity=*/1);
  const std::string id = Add(server, "held");
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().Holds(id) && !h.source().reading(); }));
  server.Run({"DEL", "orders"});
  // Out of room, so no read would meet NOGROUP: the settlement's report is what re-creates it.
  h.source().RequestGroupRecreation();
  ASSERT_TRUE(h.RunUntil([&] {
    redis::Reply groups = server.RunAllowingError({"XINFO", "GROUPS", "orders"});
    return !groups.IsError() && groups.view().Size() == 1;
  }));
  EXPECT_FALSE(h.fatal_.has_value());
}

TEST(PlainIntake, ReclaimsADeadPeersIdleEntriesOnlyAfterTheDrain) {
  RedisServer server;
  server.Run({"XGROUP", "CREATE", "orders", "g", "0", "MKSTREAM"});
  const std::string own = Add(server, "own");
  server.Run({"XREADGROUP", "GROUP", "g", "c1", "COUNT", "10", "STREAMS", "orders", ">"});
  const std::string peers = Add(server, "peer's");
  server.Run({"XREADGROUP", "GROUP", "g", "peer", "COUNT", "10", "STREAMS", "orders", ">"});

  config::Subscription sub = Sub();
  sub.claim.min_idle = Millis(100);
  Harness h(server, 100, sub);
  // Reading is paused (health_url unhealthy): the drain cannot run, although there is room.
  h.ledger().SetPause({SteadyTime::max()});
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.group_ready_ == 1; }));
  // Several reclaim intervals, the peer's entry long idle: still the peer's.
  h.RunFor(Millis(600));
  EXPECT_FALSE(h.source().drained());
  EXPECT_EQ(Pending(server, peers).consumer, "peer") << "reclaimed before the drain";
  EXPECT_FALSE(h.ledger().Holds(peers));

  h.ledger().SetPause({});
  h.source().Poke();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained(); }));
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().Holds(peers); }));
  EXPECT_EQ(Pending(server, peers).consumer, "c1");
  EXPECT_EQ(h.ledger().Find(peers)->attempts, 2) << "the peer's delivery and the claim";
  EXPECT_EQ(h.ledger().Find(own)->attempts, 2);
}

// SPEC 4.1 step 4: the ids XAUTOCLAIM reports deleted (its third reply element: pending, their
// payload gone) are counted in streamcar_deleted_entries_total. Redis 7 has already taken them
// out of the pending list, so the count is all that shows them.
TEST(PlainIntake, APeersPendingEntryDeletedIsCountedByTheReclaimBeat) {
  RedisServer server;
  server.Run({"XGROUP", "CREATE", "orders", "g", "0", "MKSTREAM"});
  const std::string gone = Add(server, "gone");
  const std::string kept = Add(server, "kept");
  server.Run({"XREADGROUP", "GROUP", "g", "peer", "COUNT", "10", "STREAMS", "orders", ">"});
  server.Run({"XDEL", "orders", gone});

  config::Subscription sub = Sub();
  sub.claim.min_idle = Millis(100);
  Harness h(server, 100, sub);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().Holds(kept); })) << "the reclaim beat claimed";
  EXPECT_EQ(Pending(server, kept).consumer, "c1");
  EXPECT_EQ(h.metrics().deleted_entries->Value(), 1) << "reported deleted by XAUTOCLAIM";
  EXPECT_EQ(h.metrics().claimed_autoclaim->Value(), 1) << "only the entry that is still there";
  h.RunFor(Millis(300));  // later beats find nothing more
  EXPECT_EQ(h.metrics().deleted_entries->Value(), 1);
  EXPECT_EQ(PendingCount(server), 1);
}

// Starts the source and holds one entry: the read that brought it ended, and the next read
// started in the same turn of the loop, so it has its whole BLOCK period ahead when this returns.
void BlockWithOneEntryHeld(Harness& h, const RedisServer& server) {
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && h.source().reading(); }));
  const std::string first = Add(server, "first");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().Holds(first); }));
  ASSERT_TRUE(h.source().reading());
  ASSERT_TRUE(h.RunUntil([&] { return Blocked(server); }));
}

// Stops the source; how long until it said it had stopped.
Millis TimeTheStop(Harness& h) {
  bool stopped = false;
  const SteadyTime begin = SteadyClock::now();
  h.source().Stop([&] { stopped = true; });
  EXPECT_FALSE(stopped) << "never inside Stop";
  EXPECT_TRUE(h.RunUntil([&] { return stopped; }));
  return std::chrono::duration_cast<Millis>(SteadyClock::now() - begin);
}

TEST(PlainIntake, StopEndsABlockingReadAtOnce) {
  RedisServer server;
  Harness h(server);
  BlockWithOneEntryHeld(h, server);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_LT(TimeTheStop(h).count(), 500) << "waited for the BLOCK to run out";
  EXPECT_FALSE(h.source().reading());
  // Nothing is read after the stop.
  Add(server, "late");
  h.RunFor(Millis(200));
  EXPECT_EQ(h.ledger().held(), 1u);
  EXPECT_EQ(PendingCount(server), 1);
}

// The command connection, which sends CLIENT UNBLOCK, is down when the stop comes (Redis closed
// it; at start it may still be opening): the UNBLOCK goes once it is up again, and the stop does
// not wait out the read's whole BLOCK.
TEST(PlainIntake, StopEndsABlockingReadOnceTheCommandConnectionIsBack) {
  RedisServer server;
  Harness h(server);
  BlockWithOneEntryHeld(h, server);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(h.RunUntil([&] { return h.command().ready(); }));
  server.Run({"CLIENT", "KILL", "ID", std::to_string(*h.command().client_id())});
  ASSERT_TRUE(h.RunUntil([&] { return !h.command().connected(); }));
  EXPECT_LT(TimeTheStop(h).count(), 500) << "waited for the BLOCK to run out";
  EXPECT_TRUE(h.command().ready());
}

TEST(PlainIntake, StopRoutesWhatTheLastReadBrought) {
  RedisServer server;
  Harness h(server);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && h.source().reading(); }));
  ASSERT_TRUE(h.RunUntil([&] { return Blocked(server); }));
  // The blocked read is answered with this entry; the loop has not seen the answer yet.
  const std::string id = Add(server, "in flight");
  bool stopped = false;
  bool held_when_stopped = false;
  h.source().Stop([&] {
    stopped = true;
    held_when_stopped = h.ledger().Holds(id);
  });
  ASSERT_TRUE(h.RunUntil([&] { return stopped; }));
  EXPECT_TRUE(held_when_stopped) << "read (one delivery counted) but not routed by the stop";
  EXPECT_TRUE(h.ledger().Holds(id));
  EXPECT_EQ(Pending(server, id).consumer, "c1");
}

TEST(PlainIntake, APauseEndsTheBlockingReadInProgress) {
  RedisServer server;
  Harness h(server);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && h.source().reading(); }));
  const std::string first = Add(server, "first");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().Holds(first); }));
  ASSERT_TRUE(h.RunUntil([&] { return Blocked(server); }));
  ASSERT_TRUE(h.RunUntil([&] { return h.command().ready(); }));  // CLIENT UNBLOCK's connection
  // The handler refuses the connection: the entry is handed back and reading pauses.
  const SteadyTime now = h.loop_->clock().Now();
  const auto refs = h.ledger().TakeReady(1, now);
  ASSERT_EQ(refs.size(), 1u);
  h.ledger().HandBack(refs);
  h.ledger().SetPause({now + Millis(30000), /*reads_wait_while_held=*/true});
  h.source().Poke();
  ASSERT_TRUE(h.RunUntil([&] { return !h.source().reading(); }, Millis(500)))
      << "the BLOCK read went on while paused";
  // What is written meanwhile stays in the stream, not read into a paused consumer.
  Add(server, "while paused");
  h.RunFor(Millis(300));
  EXPECT_EQ(PendingCount(server), 1);
  EXPECT_EQ(h.ledger().held(), 1u);
  // The handler answers again: reading goes on.
  h.ledger().SetPause({});
  h.source().Poke();
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 2; }));
}

TEST(PlainIntake, AfterALostReadConnectionOwnPendingEntriesNothingHoldsComeBack) {
  RedisServer server;
  Harness h(server);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && h.source().reading(); }));
  const std::string a = Add(server, "a");
  const std::string b = Add(server, "b");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 2; }));
  // As if the reply that carried `a` had been lost: pending for c1, held by nobody.
  ASSERT_EQ(h.ledger().MarkLost(a), EntryLedger::LostResult::kDropped);
  ASSERT_FALSE(h.ledger().Holds(a));
  const uint64_t generation = h.read().generation();
  const int64_t client = *h.read().client_id();
  server.Run({"CLIENT", "KILL", "ID", std::to_string(client)});
  ASSERT_TRUE(h.RunUntil([&] { return h.read().generation() > generation; }));
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().Holds(a); }));
  EXPECT_EQ(h.ledger().Find(a)->attempts, 1) << "the re-read counts no delivery";
  EXPECT_EQ(Pending(server, a).count, 1);
  EXPECT_EQ(h.ledger().held(), 2u);
  EXPECT_EQ(h.ledger().Find(b)->attempts, 1);
  // Reading goes on after the re-read.
  const std::string c = Add(server, "c");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().Holds(c); }));
}

TEST(PlainIntake, AnAmbiguousSettlementReReadsOnlyWhatNothingHolds) {
  RedisServer server;
  Harness h(server);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && h.source().reading(); }));
  const std::string a = Add(server, "a");
  const std::string b = Add(server, "b");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 2; }));
  ASSERT_EQ(h.ledger().MarkLost(b), EntryLedger::LostResult::kDropped);
  const int admitted = h.admitted_;
  h.source().RequestRecovery();
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().Holds(b); }));
  EXPECT_EQ(h.ledger().held(), 2u);
  EXPECT_GT(h.admitted_, admitted);
  EXPECT_EQ(Pending(server, a).count, 1);
  EXPECT_EQ(Pending(server, b).count, 1);
}

// SPEC 3.5 across an ambiguous retry claim: the lanes kept for entries released ambiguously are
// given back by the recovery re-read, to the entry itself when it is still pending for this
// consumer, else to the next entry with its key.
TEST(PlainIntake, TheRecoveryGivesKeptLanesBack) {
  RedisServer server;
  Harness h(server, 100, KeyedSub());
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && h.source().reading(); }));
  const std::string a1 = Add(server, "a");
  const std::string a2 = Add(server, "a");
  const std::string b1 = Add(server, "b");
  const std::string b2 = Add(server, "b");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 4; }));
  const SteadyTime now = h.loop_->clock().Now();
  auto out = h.ledger().TakeReady(10, now);
  ASSERT_EQ(out.size(), 2u);  // a1 and b1; a2 and b2 wait behind them
  for (const EntryRef& ref : out) {
    ASSERT_EQ(h.ledger().ScheduleRetry(ref, now), EntryLedger::Applied::kApplied);
  }
  ASSERT_EQ(h.ledger().TakeDueRetries(now).size(), 2u);
  // Both claims were ambiguous; b1's was in fact applied by a peer that then settled it.
  ASSERT_TRUE(h.ledger().ReleaseKeepingLane(a1));
  ASSERT_TRUE(h.ledger().ReleaseKeepingLane(b1));
  server.Run({"XACK", "orders", "g", b1});
  EXPECT_TRUE(h.ledger().TakeReady(10, now).empty());
  h.source().RequestRecovery();
  ASSERT_TRUE(h.RunUntil([&] { return !h.ledger().has_kept_lanes(); }));
  EXPECT_TRUE(h.ledger().Holds(a1)) << "a1 is still pending for this consumer: read again";
  EXPECT_FALSE(h.ledger().Holds(b1));
  std::vector<std::string> ready;
  for (const EntryRef& ref : h.ledger().TakeReady(10, h.loop_->clock().Now())) {
    ready.push_back(ref.id);
  }
  EXPECT_EQ(ready, (std::vector<std::string>{a1, b2})) << "a2 overtook a1, or b2 stayed blocked";
}

// The recovery that is to give kept lanes back meets NOGROUP (the stream was deleted with its
// group): the group is re-created, the re-read runs again, finds nothing, and the lane goes on;
// no tight loop of failing re-reads.
TEST(PlainIntake, ARecoveryMeetingNogroupRecreatesTheGroupAndGivesKeptLanesBack) {
  RedisServer server;
  Harness h(server, 100, KeyedSub());
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && h.source().reading(); }));
  const std::string a1 = Add(server, "a");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 1; }));
  auto out = h.ledger().TakeReady(10, h.loop_->clock().Now());
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(h.ledger().DeadLetter(out[0]), EntryLedger::Applied::kApplied);
  ASSERT_TRUE(h.ledger().ReleaseKeepingLane(a1));
  server.Run({"DEL", "orders"});
  RedisMonitor monitor(server.port());
  h.source().RequestRecovery();
  ASSERT_TRUE(h.RunUntil([&] { return !h.ledger().has_kept_lanes(); }));
  EXPECT_EQ(server.Run({"XINFO", "GROUPS", "orders"}).view().Size(), 1u) << "group not re-created";
  ASSERT_TRUE(monitor.ok());
  EXPECT_LT(monitor.Matching("XPENDING").size(), 10u)
      << "the failing re-read was repeated in a loop";
  const std::string a2 = Add(server, "a");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().Holds(a2); }));
  auto next = h.ledger().TakeReady(10, h.loop_->clock().Now());
  ASSERT_EQ(next.size(), 1u) << "the key stayed blocked";
  EXPECT_EQ(next[0].id, a2);
}

TEST(PlainIntake, AStreamKeyOfAnotherTypeIsFatal) {
  RedisServer server;
  server.Run({"SET", "orders", "not a stream"});
  Harness h(server);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.fatal_.has_value(); }));
  EXPECT_EQ(h.fatal_->code(), StatusCode::kFatal);
  EXPECT_NE(h.fatal_->message().find("WRONGTYPE"), std::string::npos) << h.fatal_->message();
  EXPECT_EQ(h.group_ready_, 0);
  EXPECT_EQ(server.Run({"GET", "orders"}).view().Str(), "not a stream") << "left untouched";
}

TEST(PlainIntake, ADeadLetterKeyOfAnotherTypeIsFatal) {
  RedisServer server;
  server.Run({"SET", "orders:dlq", "not a stream"});
  Harness h(server);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.fatal_.has_value(); }));
  EXPECT_EQ(h.fatal_->code(), StatusCode::kFatal);
  EXPECT_NE(h.fatal_->message().find(
                "dead_letter.stream key \"orders:dlq\" exists and is a string, not a stream"),
            std::string::npos)
      << h.fatal_->message();
  EXPECT_EQ(h.group_ready_, 0);
}

TEST(PlainIntake, AckDeleteWithAnotherGroupAndNoXackdelIsFatal) {
  RedisServer server;
  const bool has_ackdel = server.Run({"COMMAND", "INFO", "XACKDEL"}).view()[0].IsArray();
  if (has_ackdel) GTEST_SKIP() << "this server has XACKDEL";
  server.Run({"XGROUP", "CREATE", "orders", "other", "0", "MKSTREAM"});
  config::Subscription sub = Sub();
  sub.ack.delete_entries = true;
  Harness h(server, 100, sub);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.fatal_.has_value(); }));
  EXPECT_NE(h.fatal_->message().find("(it has 2)"), std::string::npos) << h.fatal_->message();
}

TEST(PlainIntake, AckDeleteAloneWithoutXackdelAcknowledgesThenDeletes) {
  RedisServer server;
  const bool has_ackdel = server.Run({"COMMAND", "INFO", "XACKDEL"}).view()[0].IsArray();
  config::Subscription sub = Sub();
  sub.ack.delete_entries = true;
  Harness h(server, 100, sub);
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.ack_mode_.has_value(); }));
  EXPECT_EQ(*h.ack_mode_, has_ackdel ? redis::AckMode::kAckDel : redis::AckMode::kAckThenDelete);
  EXPECT_EQ(h.group_ready_, 1);
}

}  // namespace
}  // namespace streamcar::runtime
