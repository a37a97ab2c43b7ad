// The fenced data plane of a shard (SHARDING.md B5, B10.1) against a real redis-server, through
// the runtime's seam (FencedShardOps : redis::SubscriptionOps) and the plain parsers: a token acts
// only while it is the installed one, installs only move forward, takeover claims the whole PEL in
// id order, and the wait for new entries changes nothing.

#include "sidecar/sharding/fenced_script.h"

#include <gtest/gtest.h>

#include "sidecar/keys/sharding_keys.h"
#include "sidecar/redis/connection.h"
#include "sidecar/sharding/fenced_ops.h"
#include "tests/support/redis_server.h"

namespace streamcar::sharding {
namespace {

using redis::SubscriptionOps;
using ::streamcar::testing::RedisServer;

class FencedScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    connection_ = server_.Connect();
    for (const auto* script : FencedScripts()) ASSERT_TRUE(connection_->Run(script->Load()).ok());
  }

  // The reply, or the Status of an error reply (Connection::Run turns those into a Status).
  StatusOr<redis::Reply> Run(const redis::Command& command) { return connection_->Run(command); }
  redis::Reply RunOk(const redis::Command& command) {
    auto reply = Run(command);
    EXPECT_TRUE(reply.ok()) << reply.status().message();
    return reply.ok() ? std::move(*reply) : redis::Reply();
  }
  FencedShardOps Owner(int64_t token, const std::string& member, const std::string& consumer) {
    return FencedShardOps(key_, "billing", consumer, token, member, 1);
  }
  // The install's outcome: nullopt installed, else the token installed instead.
  std::optional<int64_t> Install(const FencedShardOps& ops, std::string_view start = "0") {
    auto reply = Run(ops.EnsureGroup(start));
    if (reply.ok()) {
      EXPECT_TRUE(ops.ParseEnsureGroup(reply->view()).ok());
      return std::nullopt;
    }
    auto by = FencedShardOps::FencedBy(reply.status());
    EXPECT_TRUE(by.has_value()) << reply.status().message();
    return by;
  }
  std::string Add(const std::string& value) {
    return std::string(server_.Run({"XADD", key_, "*", "n", value}).view().Str());
  }
  std::vector<StreamEntry> ReadAll(const FencedShardOps& ops) {
    auto read = FencedShardOps::ParseFencedRead(RunOk(ops.ReadNew(100, Millis(0))).view());
    EXPECT_TRUE(read.ok()) << read.status().message();
    return read.ok() ? read->entries : std::vector<StreamEntry>{};
  }
  // Installs `ops`, appends one entry and reads it: pending for `ops`' consumer.
  StreamEntry InstallAndReadOne(const FencedShardOps& ops, const std::string& value) {
    EXPECT_FALSE(Install(ops));
    Add(value);
    std::vector<StreamEntry> read = ReadAll(ops);
    EXPECT_EQ(read.size(), 1u);
    return read.empty() ? StreamEntry{} : read[0];
  }
  // [consumer, delivery count] of a pending id; consumer "" when not pending.
  std::pair<std::string, int64_t> PendingOf(const std::string& id) {
    auto reply = server_.Run({"XPENDING", key_, "billing", id, id, "1"});
    if (reply.view().Size() == 0) return {"", 0};
    return {std::string(reply.view()[0][1].Str()), reply.view()[0][3].Integer()};
  }
  std::string LastDelivered() {
    auto reply = server_.Run({"XINFO", "GROUPS", key_});
    auto group = reply.view()[0];
    for (size_t i = 0; i + 1 < group.Size(); i += 2) {
      if (group[i].Str() == "last-delivered-id") return std::string(group[i + 1].Str());
    }
    return "";
  }
  // The token a refused step names, or nullopt when it was not refused.
  std::optional<int64_t> RefusedWith(const redis::Command& command) {
    auto reply = Run(command);
    return reply.ok() ? std::nullopt : FencedShardOps::FencedBy(reply.status());
  }

  RedisServer server_;
  std::unique_ptr<redis::Connection> connection_;
  const std::string key_ = keys::ShardKey(keys::DefaultKeyPattern("orders"), 3);
};

TEST_F(FencedScriptTest, TheKeysOfAShardShareItsHashTag) {
  FencedShardOps ops = Owner(1, "a", "pod-a");
  EXPECT_EQ(key_, "orders:{3}");
  EXPECT_EQ(ops.fence_key(), "orders:{3}:sc:billing:fence");
  EXPECT_EQ(ops.dead_letter_key(), "orders:{3}:dlq");
  EXPECT_EQ(keys::CoordinatorKeysFor("orders", "billing").meta, "sc:{orders:billing}:meta");
}

TEST_F(FencedScriptTest, AnOldTokenActsUntilTheNewOneIsInstalledAndNeverAfter) {
  FencedShardOps old_owner = Owner(7, "a", "pod-a");
  FencedShardOps new_owner = Owner(9, "b", "pod-b");
  ASSERT_FALSE(Install(old_owner));
  Add("1");
  Add("2");
  std::vector<StreamEntry> read = ReadAll(old_owner);
  ASSERT_EQ(read.size(), 2u);
  auto acked = RunOk(old_owner.Ack(std::vector{read[0].id}, redis::AckMode::kAckOnly).commands[0]);
  EXPECT_EQ(acked.view().Integer(), 1);

  ASSERT_FALSE(Install(new_owner));
  EXPECT_EQ(
      RefusedWith(old_owner.Ack(std::vector{read[1].id}, redis::AckMode::kAckOnly).commands[0]), 9);
  EXPECT_EQ(PendingOf(read[1].id).first, "pod-a") << "the fenced ack changed nothing";

  Add("3");
  EXPECT_EQ(RefusedWith(old_owner.ReadNew(10, Millis(0))), 9);
  EXPECT_EQ(LastDelivered(), read[1].id) << "a fenced read does not move the group";
  EXPECT_EQ(RefusedWith(old_owner.AutoClaim(Millis(0), "0-0", 10)), 9);
  EXPECT_EQ(RefusedWith(old_owner.RetryClaim(std::vector{read[1].id})), 9);
  EXPECT_EQ(RefusedWith(old_owner.KeepAlive(std::vector{read[1].id})), 9);
  EXPECT_EQ(RefusedWith(old_owner.UndoReads(std::vector{read[1].id})), 9);
  EXPECT_EQ(PendingOf(read[1].id), (std::pair<std::string, int64_t>{"pod-a", 1}));
}

TEST_F(FencedScriptTest, InstallsOnlyMoveForward) {
  ASSERT_FALSE(Install(Owner(9, "b", "pod-b")));
  EXPECT_EQ(Install(Owner(7, "a", "pod-a")), 9) << "a lower token is stale";
  EXPECT_EQ(Install(Owner(9, "a", "pod-a")), 9) << "the same token of another member is stale";
  EXPECT_FALSE(Install(Owner(9, "b", "pod-b"))) << "the same token again is idempotent";
  auto fence = server_.Run({"HGET", Owner(9, "b", "pod-b").fence_key(), "member"});
  EXPECT_EQ(fence.view().Str(), "b");
  EXPECT_EQ(server_.Run({"TTL", Owner(9, "b", "pod-b").fence_key()}).view().Integer(), -1)
      << "a fence never expires";
}

TEST_F(FencedScriptTest, InstallCreatesTheGroupAtTheStartAndKeepsAnExistingOne) {
  Add("before");
  FencedShardOps first = Owner(1, "a", "pod-a");
  ASSERT_FALSE(Install(first, "$"));
  Add("after");
  ASSERT_EQ(ReadAll(first).size(), 1u) << "start $: only entries after the group was made";
  FencedShardOps second = Owner(2, "a", "pod-a");
  ASSERT_FALSE(Install(second));  // BUSYGROUP is no error
  EXPECT_EQ(ReadAll(second).size(), 0u);

  server_.Run({"SET", "orders:{4}", "a string"});
  FencedShardOps wrong("orders:{4}", "billing", "pod-a", 1, "a", 1);
  auto refused = Run(wrong.EnsureGroup("0"));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsServerError("WRONGTYPE")) << refused.status().message();
}

TEST_F(FencedScriptTest, TakeoverClaimsEveryPendingEntryInIdOrderAndCountsTheDeleted) {
  FencedShardOps old_owner = Owner(7, "a", "pod-a");
  ASSERT_FALSE(Install(old_owner));
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Add(std::to_string(i)));
  ASSERT_EQ(ReadAll(old_owner).size(), 5u);
  server_.Run({"XCLAIM", key_, "billing", "pod-c", "0", ids[1], "JUSTID"});  // another consumer
  server_.Run({"XDEL", key_, ids[3]});

  FencedShardOps new_owner = Owner(9, "b", "pod-b");
  ASSERT_FALSE(Install(new_owner));
  auto claimed =
      SubscriptionOps::ParseAutoClaim(RunOk(new_owner.AutoClaim(Millis(60000), "0-0", 100)).view());
  ASSERT_TRUE(claimed.ok()) << claimed.status().message();
  std::vector<std::string> got;
  for (const StreamEntry& entry : claimed->entries) got.push_back(entry.id);
  EXPECT_EQ(got, (std::vector<std::string>{ids[0], ids[1], ids[2], ids[4]}))
      << "every pending entry, however recently read";
  EXPECT_EQ(claimed->deleted_ids, std::vector<std::string>{ids[3]});
  EXPECT_EQ(claimed->next_cursor, "0-0");
  EXPECT_EQ(PendingOf(ids[1]), (std::pair<std::string, int64_t>{"pod-b", 2}))
      << "claimed with one more delivery, whoever had it";
}

// The takeover as the own-PEL drain pages through it (ReadOwnPending from "0", the cursor the last
// id of each page): every pending entry of every consumer, in id order, each with exactly one more
// delivery, the deleted ones flagged, then an empty page.
TEST_F(FencedScriptTest, TakeoverPagesClaimEveryPendingEntryOnceInIdOrder) {
  FencedShardOps old_owner = Owner(7, "a", "pod-a");
  ASSERT_FALSE(Install(old_owner));
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(Add(std::to_string(i)));
  ASSERT_EQ(ReadAll(old_owner).size(), 7u);
  server_.Run({"XCLAIM", key_, "billing", "pod-c", "0", ids[2], ids[5], "JUSTID"});
  server_.Run({"XDEL", key_, ids[4]});

  FencedShardOps new_owner = Owner(9, "b", "pod-b");
  ASSERT_FALSE(Install(new_owner));
  std::vector<std::string> got, deleted;
  std::string cursor = "0";
  for (int page = 0; page < 10; ++page) {
    auto read = SubscriptionOps::ParseRead(RunOk(new_owner.ReadOwnPending(cursor, 2)).view());
    ASSERT_TRUE(read.ok()) << read.status().message();
    if (read->empty()) break;
    EXPECT_LE(read->size(), 3u);
    for (const StreamEntry& entry : *read) (entry.deleted ? deleted : got).push_back(entry.id);
    cursor = read->back().id;
  }
  EXPECT_EQ(got, (std::vector<std::string>{ids[0], ids[1], ids[2], ids[3], ids[5], ids[6]}));
  EXPECT_EQ(deleted, std::vector<std::string>{ids[4]});
  for (const std::string& id : got) {
    EXPECT_EQ(PendingOf(id), (std::pair<std::string, int64_t>{"pod-b", 2})) << id;
  }
  EXPECT_EQ(RefusedWith(old_owner.ReadOwnPending("0", 10)), 9);
}

TEST_F(FencedScriptTest, AReadReturnsAtOnceInOrderAndAnEmptyOneGivesTheTail) {
  FencedShardOps ops = Owner(7, "a", "pod-a");
  ASSERT_FALSE(Install(ops));
  auto empty = FencedShardOps::ParseFencedRead(RunOk(ops.ReadNew(10, Millis(5000))).view());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->entries.empty());
  EXPECT_EQ(empty->tail_id, "0-0");
  std::vector<std::string> ids = {Add("1"), Add("2"), Add("3")};
  std::vector<StreamEntry> read = ReadAll(ops);
  ASSERT_EQ(read.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(read[i].id, ids[i]);
  auto after = FencedShardOps::ParseFencedRead(RunOk(ops.ReadNew(10, Millis(0))).view());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->tail_id, ids[2]);
}

// The fenced read the runtime makes (FencedShardOps::WatchFence, then ReadWatched): the fence
// watched and its token checked, then the transaction. Both halves on `connection`.
StatusOr<std::optional<FencedRead>> WatchedRead(redis::Connection& connection,
                                                const FencedShardOps& ops, int count) {
  auto watched = connection.RunPipeline(ops.WatchFence());
  if (!watched.ok()) return watched.status();
  FencedShardOps::FenceCheck check = ops.CheckFence(*watched);
  if (!check.status.ok()) {
    // As the runtime does: the transaction opened is closed, or the connection's next commands
    // would be queued in it.
    if (check.in_transaction) {
      EXPECT_TRUE(connection.Run(FencedShardOps::CloseTransaction()).ok());
    }
    return check.status;
  }
  auto read = connection.RunPipeline(ops.ReadWatched(count));
  if (!read.ok()) return read.status();
  return FencedShardOps::ParseWatchedRead(*read);
}

TEST_F(FencedScriptTest, TheWatchedReadReadsInOrderAndAnEmptyOneGivesTheTail) {
  FencedShardOps ops = Owner(7, "a", "pod-a");
  ASSERT_FALSE(Install(ops));
  auto empty = WatchedRead(*connection_, ops, 10);
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  ASSERT_TRUE(empty->has_value());
  EXPECT_TRUE((*empty)->entries.empty());
  EXPECT_EQ((*empty)->tail_id, "0-0");
  std::vector<std::string> ids = {Add("1"), Add("2"), Add("3")};
  auto read = WatchedRead(*connection_, ops, 2);
  ASSERT_TRUE(read.ok() && read->has_value());
  ASSERT_EQ((*read)->entries.size(), 2u);
  EXPECT_EQ((*read)->entries[0].id, ids[0]);
  EXPECT_EQ((*read)->entries[1].id, ids[1]);
  EXPECT_EQ((*read)->entries[0].attempts, 1);
  EXPECT_EQ(PendingOf(ids[1]), (std::pair<std::string, int64_t>{"pod-a", 1}));
  auto rest = WatchedRead(*connection_, ops, 10);
  ASSERT_TRUE(rest.ok() && rest->has_value());
  ASSERT_EQ((*rest)->entries.size(), 1u);
  EXPECT_EQ((*rest)->entries[0].id, ids[2]);
  auto after = WatchedRead(*connection_, ops, 10);
  ASSERT_TRUE(after.ok() && after->has_value());
  EXPECT_TRUE((*after)->entries.empty());
  EXPECT_EQ((*after)->tail_id, ids[2]);
}

// B5's paused member: its fence check passed, then a newer owner installed its token before the
// transaction ran. EXEC runs nothing (no entry moves into the old owner's pending list, the
// group's last-delivered id stays), and the next check is refused with the new token.
TEST_F(FencedScriptTest, AnInstallBetweenTheCheckAndTheTransactionMakesTheReadRunNothing) {
  FencedShardOps old_owner = Owner(7, "a", "pod-a");
  FencedShardOps new_owner = Owner(9, "b", "pod-b");
  ASSERT_FALSE(Install(old_owner));
  Add("1");
  auto watched = connection_->RunPipeline(old_owner.WatchFence());
  ASSERT_TRUE(watched.ok());
  ASSERT_TRUE(old_owner.CheckFence(*watched).status.ok());
  auto other = server_.Connect();
  ASSERT_TRUE(other->Run(FencedInstallScript().Load()).ok());
  ASSERT_TRUE(other->Run(new_owner.EnsureGroup("0")).ok());
  auto read = connection_->RunPipeline(old_owner.ReadWatched(10));
  ASSERT_TRUE(read.ok());
  auto parsed = FencedShardOps::ParseWatchedRead(*read);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_FALSE(parsed->has_value()) << "EXEC ran the read after the fence moved";
  EXPECT_EQ(server_.Run({"XPENDING", key_, "billing"}).view()[0].Integer(), 0);
  EXPECT_EQ(LastDelivered(), "0-0");
  auto again = WatchedRead(*connection_, old_owner, 10);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(FencedShardOps::FencedBy(again.status()), 9);
  auto fresh = WatchedRead(*connection_, new_owner, 10);
  ASSERT_TRUE(fresh.ok() && fresh->has_value());
  EXPECT_EQ((*fresh)->entries.size(), 1u);
}

// No fence installed reads as token 0: refused. A group gone (deleted by hand) is NOGROUP, which
// the runtime answers by creating it again. The refused check left its WATCH, and the install
// then wrote the fence: without the next check's UNWATCH, its EXEC would run nothing instead.
TEST_F(FencedScriptTest, TheWatchedReadIsRefusedWithoutAFenceAndSaysNoGroup) {
  FencedShardOps ops = Owner(7, "a", "pod-a");
  auto unfenced = WatchedRead(*connection_, ops, 10);
  ASSERT_FALSE(unfenced.ok());
  EXPECT_EQ(FencedShardOps::FencedBy(unfenced.status()), 0);
  ASSERT_FALSE(Install(ops));
  server_.Run({"XGROUP", "DESTROY", key_, "billing"});
  auto no_group = WatchedRead(*connection_, ops, 10);
  ASSERT_FALSE(no_group.ok());
  EXPECT_TRUE(no_group.status().IsServerError("NOGROUP")) << no_group.status().message();
}

TEST_F(FencedScriptTest, RedisRefusesABlockingGroupReadInsideAScript) {
  server_.Run({"XGROUP", "CREATE", key_, "billing", "0", "MKSTREAM"});
  auto reply = server_.RunAllowingError(
      {"EVAL",
       "return redis.call('XREADGROUP','GROUP','billing','c','BLOCK','100','STREAMS',"
       "KEYS[1],'>')",
       "1", key_});
  ASSERT_TRUE(reply.view().IsError());
  EXPECT_NE(reply.view().Str().find("BLOCK"), std::string_view::npos) << reply.view().Str();
}

TEST_F(FencedScriptTest, TheWaitForNewEntriesChangesNothing) {
  FencedShardOps ops = Owner(7, "a", "pod-a");
  ASSERT_FALSE(Install(ops));
  std::string first = Add("1");
  const std::string before = LastDelivered();
  auto woke = connection_->RunBlocking(ops.WaitForNew("0-0", Millis(100)), Millis(100));
  ASSERT_TRUE(woke.ok());
  EXPECT_FALSE(woke->view().IsNil()) << "an entry after the tail wakes the wait";
  EXPECT_EQ(LastDelivered(), before);
  EXPECT_EQ(PendingOf(first).first, "") << "nothing entered the PEL";
  auto idle = connection_->RunBlocking(ops.WaitForNew(first, Millis(50)), Millis(50));
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE(idle->view().IsNil());
}

TEST_F(FencedScriptTest, RetryCountsADeliveryAndKeepAliveDoesNotWithThePlainShapes) {
  FencedShardOps ops = Owner(7, "a", "pod-a");
  ASSERT_FALSE(Install(ops));
  std::string id = Add("1");
  ASSERT_EQ(ReadAll(ops).size(), 1u);
  auto lost = SubscriptionOps::ParseIds(RunOk(ops.KeepAlive(std::vector{id})).view());
  ASSERT_TRUE(lost.ok());
  EXPECT_TRUE(lost->empty());
  EXPECT_EQ(PendingOf(id).second, 1);
  auto retried = SubscriptionOps::ParseRetryClaim(RunOk(ops.RetryClaim(std::vector{id})).view());
  ASSERT_TRUE(retried.ok()) << retried.status().message();
  ASSERT_EQ(retried->entries.size(), 1u);
  EXPECT_EQ(retried->entries[0].fields[0].second, "1");
  EXPECT_EQ(PendingOf(id).second, 2);
  auto undone = SubscriptionOps::ParseCount(RunOk(ops.UndoReads(std::vector{id})).view());
  ASSERT_TRUE(undone.ok());
  EXPECT_EQ(*undone, 1);
  EXPECT_EQ(PendingOf(id).second, 1) << "the read's delivery taken back";
}

TEST_F(FencedScriptTest, ADeadLetterGoesToTheShardsOwnStreamAndIsAcknowledgedInTheSameStep) {
  FencedShardOps old_owner = Owner(7, "a", "pod-a");
  const std::vector<StreamEntry> read = {InstallAndReadOne(old_owner, "poison")};
  redis::DeadLetterMeta meta{.reason = "max_attempts", .status = "500", .attempts = 3};
  const redis::DeadLetterTarget dlq{old_owner.dead_letter_key(), 0};
  FencedShardOps new_owner = Owner(9, "b", "pod-a");  // same pod name, a new grant
  ASSERT_FALSE(Install(new_owner));
  EXPECT_EQ(RefusedWith(old_owner.DeadLetter(dlq, read[0], meta, redis::AckMode::kAckOnly)), 9);
  EXPECT_EQ(server_.Run({"XLEN", dlq.stream}).view().Integer(), 0);

  auto written = SubscriptionOps::ParseDeadLetter(
      RunOk(new_owner.DeadLetter(dlq, read[0], meta, redis::AckMode::kAckOnly)).view());
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(*written, redis::DeadLetterResult::kWritten);
  EXPECT_EQ(server_.Run({"XLEN", dlq.stream}).view().Integer(), 1);
  EXPECT_EQ(PendingOf(read[0].id).first, "");
  auto record = server_.Run({"XRANGE", dlq.stream, "-", "+"});
  redis::DeadLetterRecord letter(SubscriptionOps::ParseEntries(record.view())[0]);
  EXPECT_EQ(letter.Meta("streamcar.stream"), key_);
  EXPECT_EQ(letter.Meta("streamcar.reason"), "max_attempts");

  auto repeated = SubscriptionOps::ParseDeadLetter(
      RunOk(new_owner.DeadLetter(dlq, read[0], meta, redis::AckMode::kAckOnly)).view());
  ASSERT_TRUE(repeated.ok());
  EXPECT_EQ(*repeated, redis::DeadLetterResult::kNotOurs)
      << "a repeat (its reply lost) finds the entry no longer pending";
  EXPECT_EQ(server_.Run({"XLEN", dlq.stream}).view().Integer(), 1) << "no second record";
}

TEST_F(FencedScriptTest, AcknowledgementsFollowTheAckMode) {
  FencedShardOps ops = Owner(7, "a", "pod-a");
  const StreamEntry entry = InstallAndReadOne(ops, "1");
  RunOk(ops.Ack(std::vector{entry.id}, redis::AckMode::kAckThenDelete).commands[0]);
  EXPECT_EQ(server_.Run({"XLEN", key_}).view().Integer(), 0) << "ackxdel deletes the entry";
  EXPECT_EQ(RunOk(ops.Ack(std::vector<std::string>{}, redis::AckMode::kAckOnly).commands[0])
                .view()
                .Integer(),
            0);
}

TEST(FencedBy, ReadsTheTokenOfARefusalOnly) {
  EXPECT_EQ(FencedShardOps::FencedBy(Status(StatusCode::kServerError, "FENCED 17")), 17);
  EXPECT_EQ(FencedShardOps::FencedBy(Status(StatusCode::kServerError, "STALE 4")), 4);
  EXPECT_EQ(FencedShardOps::FencedBy(Status(StatusCode::kServerError, "NOGROUP x")), std::nullopt);
  EXPECT_EQ(FencedShardOps::FencedBy(Status(StatusCode::kServerError, "FENCED x")), std::nullopt);
  EXPECT_EQ(FencedShardOps::FencedBy(Status(StatusCode::kIo, "FENCED 3")), std::nullopt);
}

}  // namespace
}  // namespace streamcar::sharding
