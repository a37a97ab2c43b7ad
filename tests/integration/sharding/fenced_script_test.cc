// The fenced data plane of a shard (SHARDING.md B5, B10.1) against a real redis-server: a token
// acts only while it is the installed one, installs only move forward, takeover claims the whole
// PEL in id order, and the wait for new entries changes nothing.

#include "sidecar/sharding/fenced_script.h"

#include <gtest/gtest.h>

#include "sidecar/redis/connection.h"
#include "sidecar/sharding/fenced_ops.h"
#include "sidecar/sharding/sharding_keys.h"
#include "tests/support/redis_server.h"

namespace streamcar::sharding {
namespace {

using ::streamcar::testing::RedisServer;

class FencedScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    connection_ = server_.Connect();
    ASSERT_TRUE(connection_->Run(FencedScript().Load()).ok());
  }

  redis::Reply Run(const redis::Command& command) {
    auto reply = connection_->Run(command);
    EXPECT_TRUE(reply.ok()) << reply.status().message();
    return reply.ok() ? std::move(*reply) : redis::Reply();
  }
  Fenced<int64_t> Install(const FencedOps& ops, int64_t token, const std::string& member) {
    auto parsed = FencedOps::ParseInstall(Run(ops.Install(token, member, 1, "0")).view());
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    return parsed.ok() ? *parsed : Fenced<int64_t>{};
  }
  std::string Add(const std::string& value) {
    return std::string(server_.Run({"XADD", key_, "*", "n", value}).view().Str());
  }
  std::vector<StreamEntry> ReadAll(const FencedOps& ops, int64_t token) {
    auto parsed = FencedOps::ParseRead(Run(ops.Read(token, 100)).view());
    EXPECT_TRUE(parsed.ok() && parsed->done());
    return parsed.ok() ? parsed->value.entries : std::vector<StreamEntry>{};
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

  RedisServer server_;
  std::unique_ptr<redis::Connection> connection_;
  const std::string key_ = ShardKey(DefaultKeyPattern("orders"), 3);
  FencedOps old_owner_{key_, "billing", "pod-a"};
  FencedOps new_owner_{key_, "billing", "pod-b"};
};

TEST_F(FencedScriptTest, TheKeysOfAShardShareItsHashTag) {
  EXPECT_EQ(key_, "orders:{3}");
  EXPECT_EQ(old_owner_.fence_key(), "orders:{3}:sc:billing:fence");
  EXPECT_EQ(old_owner_.dead_letter_key(), "orders:{3}:dlq");
  EXPECT_EQ(CoordinatorKeysFor("orders", "billing").meta, "sc:{orders:billing}:meta");
}

TEST_F(FencedScriptTest, AnOldTokenActsUntilTheNewOneIsInstalledAndNeverAfter) {
  ASSERT_TRUE(Install(old_owner_, 7, "a").done());
  Add("1");
  Add("2");
  std::vector<StreamEntry> read = ReadAll(old_owner_, 7);
  ASSERT_EQ(read.size(), 2u);
  auto acked = FencedOps::ParseAck(
      Run(old_owner_.Ack(7, std::vector<std::string>{read[0].id}, redis::AckMode::kAckOnly))
          .view());
  ASSERT_TRUE(acked.ok() && acked->done());
  EXPECT_EQ(acked->value, 1);

  ASSERT_TRUE(Install(new_owner_, 9, "b").done());
  auto fenced = FencedOps::ParseAck(
      Run(old_owner_.Ack(7, std::vector<std::string>{read[1].id}, redis::AckMode::kAckOnly))
          .view());
  ASSERT_TRUE(fenced.ok());
  EXPECT_EQ(fenced->installed_instead, 9);
  EXPECT_EQ(PendingOf(read[1].id).first, "pod-a") << "the fenced ack changed nothing";

  Add("3");
  auto stale_read = FencedOps::ParseRead(Run(old_owner_.Read(7, 10)).view());
  ASSERT_TRUE(stale_read.ok());
  EXPECT_EQ(stale_read->installed_instead, 9);
  EXPECT_EQ(LastDelivered(), read[1].id) << "a fenced read does not move the group";
  for (const auto& command :
       {old_owner_.ClaimAll(7, "0-0", 10), old_owner_.Retry(7, std::vector{read[1].id}),
        old_owner_.KeepAlive(7, std::vector{read[1].id})}) {
    EXPECT_EQ(Run(command).view()[0].Str(), "FENCED");
  }
}

TEST_F(FencedScriptTest, InstallsOnlyMoveForward) {
  ASSERT_TRUE(Install(new_owner_, 9, "b").done());
  EXPECT_EQ(Install(old_owner_, 7, "a").installed_instead, 9) << "a lower token is stale";
  EXPECT_EQ(Install(old_owner_, 9, "a").installed_instead, 9)
      << "the same token of another member is stale";
  EXPECT_TRUE(Install(new_owner_, 9, "b").done()) << "the same token again is idempotent";
  auto fence = server_.Run({"HGET", new_owner_.fence_key(), "member"});
  EXPECT_EQ(fence.view().Str(), "b");
  EXPECT_EQ(server_.Run({"TTL", new_owner_.fence_key()}).view().Integer(), -1)
      << "a fence never expires";
}

TEST_F(FencedScriptTest, InstallCreatesTheGroupAtTheStartAndKeepsAnExistingOne) {
  Add("before");
  FencedOps ops(key_, "billing", "pod-a");
  auto installed = FencedOps::ParseInstall(Run(ops.Install(1, "a", 1, "$")).view());
  ASSERT_TRUE(installed.ok() && installed->done());
  Add("after");
  std::vector<StreamEntry> read = ReadAll(ops, 1);
  ASSERT_EQ(read.size(), 1u) << "start $: only entries after the group was made";
  ASSERT_TRUE(Install(ops, 2, "a").done());  // BUSYGROUP is no error
  EXPECT_EQ(ReadAll(ops, 2).size(), 0u);

  server_.Run({"SET", "orders:{4}", "a string"});
  FencedOps wrong("orders:{4}", "billing", "pod-a");
  auto refused = connection_->Run(wrong.Install(1, "a", 1, "0"));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsServerError("WRONGTYPE")) << refused.status().message();
}

TEST_F(FencedScriptTest, TakeoverClaimsEveryPendingEntryInIdOrderAndCountsTheDeleted) {
  ASSERT_TRUE(Install(old_owner_, 7, "a").done());
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Add(std::to_string(i)));
  ASSERT_EQ(ReadAll(old_owner_, 7).size(), 5u);
  server_.Run({"XCLAIM", key_, "billing", "pod-c", "0", ids[1], "JUSTID"});  // another consumer
  server_.Run({"XDEL", key_, ids[3]});

  ASSERT_TRUE(Install(new_owner_, 9, "b").done());
  auto claimed = FencedOps::ParseClaimAll(Run(new_owner_.ClaimAll(9, "0-0", 100)).view());
  ASSERT_TRUE(claimed.ok() && claimed->done()) << claimed.status().message();
  std::vector<std::string> got;
  for (const StreamEntry& entry : claimed->value.entries) got.push_back(entry.id);
  EXPECT_EQ(got, (std::vector<std::string>{ids[0], ids[1], ids[2], ids[4]}));
  EXPECT_EQ(claimed->value.deleted_ids, std::vector<std::string>{ids[3]});
  EXPECT_EQ(claimed->value.next_cursor, "0-0");
  EXPECT_EQ(PendingOf(ids[1]), (std::pair<std::string, int64_t>{"pod-b", 2}))
      << "claimed with one more delivery, whoever had it";
}

TEST_F(FencedScriptTest, AReadReturnsAtOnceInOrderAndAnEmptyOneGivesTheTail) {
  ASSERT_TRUE(Install(old_owner_, 7, "a").done());
  auto empty = FencedOps::ParseRead(Run(old_owner_.Read(7, 10)).view());
  ASSERT_TRUE(empty.ok() && empty->done());
  EXPECT_TRUE(empty->value.entries.empty());
  EXPECT_EQ(empty->value.tail_id, "0-0");
  std::vector<std::string> ids = {Add("1"), Add("2"), Add("3")};
  std::vector<StreamEntry> read = ReadAll(old_owner_, 7);
  ASSERT_EQ(read.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(read[i].id, ids[i]);
  auto after = FencedOps::ParseRead(Run(old_owner_.Read(7, 10)).view());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->value.tail_id, ids[2]);
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
  ASSERT_TRUE(Install(old_owner_, 7, "a").done());
  std::string first = Add("1");
  const std::string before = LastDelivered();
  auto woke = connection_->RunBlocking(old_owner_.WaitForNew("0-0", Millis(100)), Millis(100));
  ASSERT_TRUE(woke.ok());
  EXPECT_FALSE(woke->view().IsNil()) << "an entry after the tail wakes the wait";
  EXPECT_EQ(LastDelivered(), before);
  EXPECT_EQ(PendingOf(first).first, "") << "nothing entered the PEL";
  auto idle = connection_->RunBlocking(old_owner_.WaitForNew(first, Millis(50)), Millis(50));
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE(idle->view().IsNil());
}

TEST_F(FencedScriptTest, RetryCountsADeliveryAndKeepAliveDoesNot) {
  ASSERT_TRUE(Install(old_owner_, 7, "a").done());
  std::string id = Add("1");
  ASSERT_EQ(ReadAll(old_owner_, 7).size(), 1u);
  auto kept = FencedOps::ParseIds(Run(old_owner_.KeepAlive(7, std::vector{id})).view());
  ASSERT_TRUE(kept.ok() && kept->done());
  EXPECT_EQ(kept->value, std::vector<std::string>{id});
  EXPECT_EQ(PendingOf(id).second, 1);
  auto retried = FencedOps::ParseEntries(Run(old_owner_.Retry(7, std::vector{id})).view());
  ASSERT_TRUE(retried.ok() && retried->done());
  ASSERT_EQ(retried->value.size(), 1u);
  EXPECT_EQ(retried->value[0].fields[0].second, "1");
  EXPECT_EQ(PendingOf(id).second, 2);
}

TEST_F(FencedScriptTest, ADeadLetterGoesToTheShardsOwnStreamAndIsAcknowledgedInTheSameStep) {
  ASSERT_TRUE(Install(old_owner_, 7, "a").done());
  Add("poison");
  std::vector<StreamEntry> read = ReadAll(old_owner_, 7);
  ASSERT_EQ(read.size(), 1u);
  redis::DeadLetterMeta meta{.reason = "max_attempts", .status = "500", .attempts = 3};
  ASSERT_TRUE(Install(new_owner_, 9, "b").done());
  auto fenced = FencedOps::ParseDone(
      Run(old_owner_.DeadLetter(7, read[0], meta, redis::AckMode::kAckOnly, 0)).view());
  ASSERT_TRUE(fenced.ok());
  EXPECT_EQ(fenced->installed_instead, 9);
  EXPECT_EQ(server_.Run({"XLEN", old_owner_.dead_letter_key()}).view().Integer(), 0);

  auto written = FencedOps::ParseDone(
      Run(new_owner_.DeadLetter(9, read[0], meta, redis::AckMode::kAckOnly, 0)).view());
  ASSERT_TRUE(written.ok() && written->done()) << written.status().message();
  EXPECT_EQ(server_.Run({"XLEN", new_owner_.dead_letter_key()}).view().Integer(), 1);
  EXPECT_EQ(PendingOf(read[0].id).first, "");
  auto record = server_.Run({"XRANGE", new_owner_.dead_letter_key(), "-", "+"});
  redis::DeadLetterRecord letter(redis::SubscriptionOps::ParseEntries(record.view())[0]);
  EXPECT_EQ(letter.Meta("streamcar.stream"), key_);
  EXPECT_EQ(letter.Meta("streamcar.reason"), "max_attempts");

  auto repeated = FencedOps::ParseDone(
      Run(new_owner_.DeadLetter(9, read[0], meta, redis::AckMode::kAckOnly, 0)).view());
  ASSERT_TRUE(repeated.ok() && repeated->done());
  EXPECT_FALSE(repeated->value) << "a repeat (its reply lost) finds the entry no longer pending";
  EXPECT_EQ(server_.Run({"XLEN", new_owner_.dead_letter_key()}).view().Integer(), 1)
      << "and writes no second record";
}

TEST_F(FencedScriptTest, AcknowledgementsFollowTheAckMode) {
  ASSERT_TRUE(Install(old_owner_, 7, "a").done());
  Add("1");
  std::vector<StreamEntry> read = ReadAll(old_owner_, 7);
  ASSERT_EQ(read.size(), 1u);
  auto acked = FencedOps::ParseAck(
      Run(old_owner_.Ack(7, std::vector{read[0].id}, redis::AckMode::kAckThenDelete)).view());
  ASSERT_TRUE(acked.ok() && acked->done());
  EXPECT_EQ(server_.Run({"XLEN", key_}).view().Integer(), 0) << "ackxdel deletes the entry";
  auto none = FencedOps::ParseAck(
      Run(old_owner_.Ack(7, std::vector<std::string>{}, redis::AckMode::kAckOnly)).view());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->value, 0);
}

}  // namespace
}  // namespace streamcar::sharding
