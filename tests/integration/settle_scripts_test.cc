// The owner-checked settlement steps (SPEC 3.2, 3.3) against a real redis-server: what each
// script does to the pending entries list when the entry is ours, a peer's, gone, or when a
// command inside fails.

#include "sidecar/redis/settle_scripts.h"

#include <gtest/gtest.h>

#include "sidecar/redis/stream_ops.h"
#include "sidecar/redis/sync_ops.h"
#include "tests/support/redis_server.h"

namespace streamcar::redis {
namespace {

using testing::RedisServer;

class SettleScriptsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    session_ = std::make_unique<Session>(server_.ClientOptions(), "test", &health_);
    StopSignal stop;
    ASSERT_TRUE(session_->EnsureConnected(stop).ok());
    for (const auto* script : SettleScripts()) ASSERT_TRUE(session_->Run(script->Load()).ok());
    ASSERT_TRUE(sync::EnsureGroup(*session_, mine_, "0").ok());
  }

  // An entry read by `mine_`: pending for c1 with one delivery.
  StreamEntry ReadOne(const std::string& value = "1") {
    server_.Run({"XADD", "s", "*", "n", value});
    auto entries = sync::ReadNew(*session_, mine_, 1, Millis(10));
    EXPECT_TRUE(entries.ok() && entries->size() == 1u);
    return entries.ok() && !entries->empty() ? (*entries)[0] : StreamEntry{};
  }

  // [consumer, idle ms, delivery count] of `id` in the PEL; consumer "" when not pending.
  struct Pending {
    std::string consumer;
    int64_t idle = 0;
    int64_t count = 0;
  };
  Pending PendingOf(const std::string& id) {
    auto reply = server_.Run({"XPENDING", "s", "g", id, id, "1"});
    if (reply.view().Size() == 0) return {};
    auto row = reply.view()[0];
    return {std::string(row[1].Str()), row[2].Integer(), row[3].Integer()};
  }

  void StealAs(const std::string& peer, const std::string& id) {
    auto reply = server_.Run({"XCLAIM", "s", "g", peer, "0", id, "JUSTID"});
    ASSERT_EQ(reply.view().Size(), 1u);
  }

  RedisServer server_;
  RedisHealth health_;
  std::unique_ptr<Session> session_;
  PlainOps mine_{"s", "g", "c1"};
};

TEST_F(SettleScriptsTest, KeepAliveNeverTakesAnEntryBackFromAPeer) {
  StreamEntry ours = ReadOne("1");
  StreamEntry stolen = ReadOne("2");
  StealAs("peer", stolen.id);
  auto reply = session_->Run(mine_.KeepAlive(std::vector<std::string>{ours.id, stolen.id}));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(*PlainOps::ParseIds(reply->view()), std::vector<std::string>{stolen.id});
  EXPECT_EQ(PendingOf(stolen.id).consumer, "peer");  // still the peer's
  EXPECT_EQ(PendingOf(ours.id).consumer, "c1");
  EXPECT_EQ(PendingOf(ours.id).count, 1);  // a keepalive counts no delivery
}

TEST_F(SettleScriptsTest, RetryClaimCountsADeliveryOnlyForEntriesStillOurs) {
  StreamEntry ours = ReadOne("1");
  StreamEntry stolen = ReadOne("2");
  StreamEntry gone = ReadOne("3");
  StealAs("peer", stolen.id);
  server_.Run({"XDEL", "s", gone.id});
  auto reply =
      session_->Run(mine_.RetryClaim(std::vector<std::string>{ours.id, stolen.id, gone.id}));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  auto result = *PlainOps::ParseRetryClaim(reply->view());
  ASSERT_EQ(result.entries.size(), 1u);  // the deleted one is not returned (Redis 7)
  EXPECT_EQ(result.entries[0].id, ours.id);
  EXPECT_EQ(result.entries[0].fields[0].second, "1");
  EXPECT_EQ(result.lost_ids, std::vector<std::string>{stolen.id});
  EXPECT_EQ(PendingOf(ours.id).count, 2);
  EXPECT_EQ(result.entries[0].attempts, 2) << "the pending list's count after the claim";
  EXPECT_EQ(PendingOf(stolen.id).consumer, "peer");
  EXPECT_EQ(PendingOf(stolen.id).count, 1);  // untouched: the peer's JUSTID claim counted none
}

TEST_F(SettleScriptsTest, DeadLetterOfAWrongTypeKeyAcknowledgesNothing) {
  StreamEntry entry = ReadOne();
  server_.Run({"SET", "s:dlq", "a list left by an older worker"});
  DeadLetterMeta meta{"rejected", "422", "bad", 1, 1700000000000};
  auto reply = session_->Run(mine_.DeadLetter({"s:dlq", 0}, entry, meta, AckMode::kAckOnly));
  ASSERT_FALSE(reply.ok());
  EXPECT_TRUE(reply.status().IsServerError("WRONGTYPE")) << reply.status().message();
  EXPECT_EQ(PendingOf(entry.id).consumer, "c1");  // MULTI/EXEC would have acknowledged it
  EXPECT_EQ(server_.Run({"TYPE", "s:dlq"}).view().Str(), "string");
}

TEST_F(SettleScriptsTest, DeadLetterOfAnEntryNoLongerOursWritesNothing) {
  StreamEntry entry = ReadOne();
  StealAs("peer", entry.id);
  DeadLetterMeta meta{"max_attempts", "503", "down", 3, 1700000000000};
  auto reply = session_->Run(mine_.DeadLetter({"s:dlq", 0}, entry, meta, AckMode::kAckOnly));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->view().Integer(), 0);
  EXPECT_EQ(server_.Run({"EXISTS", "s:dlq"}).view().Integer(), 0);
  EXPECT_EQ(PendingOf(entry.id).consumer, "peer");
  // Sent twice (a pipeline re-sent after a lost reply): the second finds it settled already.
  StreamEntry again = ReadOne("2");
  ASSERT_EQ(session_->Run(mine_.DeadLetter({"s:dlq", 0}, again, meta, AckMode::kAckOnly))
                ->view()
                .Integer(),
            1);
  ASSERT_EQ(session_->Run(mine_.DeadLetter({"s:dlq", 0}, again, meta, AckMode::kAckOnly))
                ->view()
                .Integer(),
            0);
  EXPECT_EQ(server_.Run({"XLEN", "s:dlq"}).view().Integer(), 1);
}

TEST_F(SettleScriptsTest, DeadLetterWithDeleteRemovesTheEntryOnlyAfterTheWrite) {
  StreamEntry entry = ReadOne();
  DeadLetterMeta meta{"dropped", "200", "", 1, 1700000000000};
  auto reply = session_->Run(mine_.DeadLetter({"s:dlq", 5}, entry, meta, AckMode::kAckThenDelete));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->view().Integer(), 1);
  EXPECT_EQ(server_.Run({"XLEN", "s"}).view().Integer(), 0);
  EXPECT_EQ(server_.Run({"XLEN", "s:dlq"}).view().Integer(), 1);
  EXPECT_EQ(PendingOf(entry.id).consumer, "");
}

// Two-step dead letter, step 3 (SPEC 8): acknowledges only an entry still ours, as the ack mode
// says; a peer's entry stays the peer's.
TEST_F(SettleScriptsTest, OwnedAckAcknowledgesOnlyAnEntryStillOurs) {
  StreamEntry entry = ReadOne();
  auto reply = session_->Run(mine_.OwnedAck(entry.id, AckMode::kAckThenDelete));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->view().Integer(), 1);
  EXPECT_EQ(PendingOf(entry.id).consumer, "");
  EXPECT_EQ(server_.Run({"XLEN", "s"}).view().Integer(), 0) << "ackxdel deletes it";
  reply = session_->Run(mine_.OwnedAck(entry.id, AckMode::kAckThenDelete));
  EXPECT_EQ(reply->view().Integer(), 0) << "no longer pending: nothing to do";

  StreamEntry stolen = ReadOne("2");
  StealAs("peer", stolen.id);
  reply = session_->Run(mine_.OwnedAck(stolen.id, AckMode::kAckOnly));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->view().Integer(), 0);
  EXPECT_EQ(PendingOf(stolen.id).consumer, "peer");
  EXPECT_EQ(server_.Run({"XLEN", "s"}).view().Integer(), 1);
}

TEST_F(SettleScriptsTest, UndoReadsTakesBackTheReadsCountAndKeepsIdleTime) {
  StreamEntry ours = ReadOne("1");
  StreamEntry stolen = ReadOne("2");
  StealAs("peer", stolen.id);
  ASSERT_TRUE(session_
                  ->Run(Command("XCLAIM")
                            .Arg("s")
                            .Arg("g")
                            .Arg("c1")
                            .Arg(int64_t{0})
                            .Arg(ours.id)
                            .Arg("IDLE")
                            .Arg(int64_t{5000})
                            .Arg("JUSTID"))
                  .ok());
  auto reply = session_->Run(mine_.UndoReads(std::vector<std::string>{ours.id, stolen.id}));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(reply->view().Integer(), 1);
  EXPECT_EQ(PendingOf(ours.id).count, 0);  // the next read counts 1: its first delivery
  EXPECT_GE(PendingOf(ours.id).idle, 5000);
  EXPECT_EQ(PendingOf(stolen.id).count, 1);  // a peer's entry is left alone
}

TEST_F(SettleScriptsTest, OwnPendingIdsAndFetchCountNoDelivery) {
  StreamEntry a = ReadOne("1");
  StreamEntry b = ReadOne("2");
  server_.Run({"XDEL", "s", b.id});
  auto ids = sync::OwnPendingIds(*session_, mine_, "-", 10);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 2u);
  EXPECT_EQ((*ids)[0], (std::pair<std::string, int>{a.id, 1}));
  auto entries = sync::Fetch(*session_, mine_, std::vector<std::string>{a.id, b.id});
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].fields[0].second, "1");
  EXPECT_TRUE((*entries)[1].deleted);
  EXPECT_EQ(PendingOf(a.id).count, 1);
}

}  // namespace
}  // namespace streamcar::redis
