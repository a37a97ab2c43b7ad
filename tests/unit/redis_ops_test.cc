// Each build/parse pair of stream_ops.h and group_info.h on canned RESP replies, decoded by
// hiredis's reader exactly as a connection decodes what a server sends: the shapes of every
// supported server (Redis 6.2, 7, 8) and the error replies, without a server.

#include <gtest/gtest.h>

#include "sidecar/redis/connection.h"
#include "sidecar/redis/group_info.h"
#include "sidecar/redis/replica_wait.h"
#include "sidecar/redis/script.h"
#include "sidecar/redis/settle_scripts.h"
#include "sidecar/redis/stream_ops.h"
#include "tests/unit/resp_reply.h"

namespace streamcar::redis {
namespace {

using testing::ArgsOf;
using testing::Arr;
using testing::Bulk;
using testing::EntryResp;
using testing::Err;
using testing::Int;
using testing::Nil;
using testing::NilArray;
using testing::ReplyOf;
using Strings = std::vector<std::string>;

std::vector<Reply> RepliesOf(const std::vector<std::string>& resps) {
  std::vector<Reply> replies;
  for (const auto& resp : resps) replies.push_back(ReplyOf(resp));
  return replies;
}

const PlainOps kOps("s", "g", "c1");

// EVALSHA names a script by the SHA1 of its body, as Redis computes it (sha1sum's digests).
// CLIENT LIST groups a process's connections by "streamcar:<consumer>".
TEST(RedisOpsTest, AClientNameIsTheConsumerThenEachPart) {
  EXPECT_EQ(ClientName("pod-1"), "streamcar:pod-1");
  EXPECT_EQ(ClientName("pod-1", {"orders/g", "read"}), "streamcar:pod-1:orders/g:read");
  EXPECT_EQ(ClientName("pod-1", {"start"}), "streamcar:pod-1:start");
}

TEST(RedisOpsTest, AScriptIsNamedByTheSha1OfItsBody) {
  EXPECT_EQ(Script("return 1").sha(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
  EXPECT_EQ(Script("").sha(), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

TEST(RedisOpsTest, ReadOfNothingIsNoEntries) {
  auto entries = SubscriptionOps::ParseRead(ReplyOf(NilArray()).view());
  ASSERT_TRUE(entries.ok());
  EXPECT_TRUE(entries->empty());
}

TEST(RedisOpsTest, ReadReturnsEntriesWithTheirFieldsInOrder) {
  auto reply =
      ReplyOf(Arr({Arr({Bulk("s"), Arr({EntryResp("1-1", {"a", "1", "a", "2"}),
                                        EntryResp("1-2", {"b", std::string("\0x", 2)})})})}));
  auto entries = SubscriptionOps::ParseRead(reply.view());
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].id, "1-1");
  EXPECT_EQ((*entries)[0].fields,
            (std::vector<std::pair<std::string, std::string>>{{"a", "1"}, {"a", "2"}}));
  EXPECT_EQ((*entries)[1].fields[0].second, std::string("\0x", 2));
  EXPECT_FALSE((*entries)[1].deleted);
  EXPECT_EQ((*entries)[1].attempts, 1);
}

TEST(RedisOpsTest, ReadOfADeletedPendingEntryFlagsIt) {
  // A history read of an entry deleted while pending: [id, nil] (DESIGN.md trap 1).
  auto reply = ReplyOf(
      Arr({Arr({Bulk("s"), Arr({Arr({Bulk("1-1"), NilArray()}), EntryResp("1-2", {"n", "2"})})})}));
  auto entries = SubscriptionOps::ParseRead(reply.view());
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].id, "1-1");
  EXPECT_TRUE((*entries)[0].deleted);
  EXPECT_TRUE((*entries)[0].fields.empty());
  EXPECT_FALSE((*entries)[1].deleted);
}

TEST(RedisOpsTest, ReadErrorIsTheServersError) {
  auto entries = SubscriptionOps::ParseRead(ReplyOf(Err("NOGROUP No such key 's'")).view());
  EXPECT_TRUE(entries.status().IsServerError("NOGROUP"));
  EXPECT_EQ(SubscriptionOps::ParseRead(ReplyOf(Int(3)).view()).status().code(),
            StatusCode::kProtocol);
}

TEST(RedisOpsTest, AutoClaimInTheRedis7Shape) {
  auto reply = ReplyOf(
      Arr({Bulk("5-0"), Arr({EntryResp("1-1", {"n", "1"})}), Arr({Bulk("1-2"), Bulk("1-3")})}));
  auto result = SubscriptionOps::ParseAutoClaim(reply.view());
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->next_cursor, "5-0");
  ASSERT_EQ(result->entries.size(), 1u);
  EXPECT_EQ(result->entries[0].id, "1-1");
  EXPECT_EQ(result->deleted_ids, (Strings{"1-2", "1-3"}));
}

TEST(RedisOpsTest, AutoClaimInTheRedis62Shape) {
  // Two elements; a deleted entry inline, as [id, nil] or as a bare nil (its id unknown).
  auto reply = ReplyOf(Arr({Bulk("0-0"), Arr({EntryResp("1-1", {"n", "1"}),
                                              Arr({Bulk("1-2"), NilArray()}), NilArray()})}));
  auto result = SubscriptionOps::ParseAutoClaim(reply.view());
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->next_cursor, "0-0");
  ASSERT_EQ(result->entries.size(), 1u);
  EXPECT_EQ(result->entries[0].id, "1-1");
  EXPECT_EQ(result->deleted_ids, Strings{"1-2"});
}

TEST(RedisOpsTest, AutoClaimOfAnotherShapeIsAProtocolError) {
  EXPECT_EQ(SubscriptionOps::ParseAutoClaim(ReplyOf(Arr({Bulk("0-0")})).view()).status().code(),
            StatusCode::kProtocol);
  EXPECT_TRUE(SubscriptionOps::ParseAutoClaim(ReplyOf(Err("NOGROUP x")).view())
                  .status()
                  .IsServerError("NOGROUP"));
}

TEST(RedisOpsTest, DeliveryCountsAreOneExactLookupPerEntry) {
  std::vector<StreamEntry> entries(3);
  entries[0].id = "1-1";
  entries[1].id = "9-9";
  entries[2].id = "20-1";
  auto commands = kOps.DeliveryCounts(entries);
  ASSERT_EQ(commands.size(), 3u);
  EXPECT_EQ(ArgsOf(commands[1]), (Strings{"XPENDING", "s", "g", "9-9", "9-9", "1", "c1"}));
  // Ours with 4 deliveries; no longer ours (empty); ours with 2.
  auto replies = RepliesOf({Arr({Arr({Bulk("1-1"), Bulk("c1"), Int(10), Int(4)})}), Arr({}),
                            Arr({Arr({Bulk("20-1"), Bulk("c1"), Int(10), Int(2)})})});
  ASSERT_TRUE(SubscriptionOps::ApplyDeliveryCounts(replies, &entries).ok());
  EXPECT_EQ(entries[0].attempts, 4);
  EXPECT_EQ(entries[1].attempts, 1);  // the lower bound
  EXPECT_EQ(entries[2].attempts, 2);
  auto failed = RepliesOf({Arr({}), Err("NOGROUP gone"), Arr({})});
  EXPECT_TRUE(SubscriptionOps::ApplyDeliveryCounts(failed, &entries).IsServerError("NOGROUP"));
  EXPECT_FALSE(SubscriptionOps::ApplyDeliveryCounts(RepliesOf({Arr({})}), &entries).ok());
}

TEST(RedisOpsTest, AckGroupsByMode) {
  const Strings ids = {"1-1", "1-2"};
  auto only = kOps.Ack(ids, AckMode::kAckOnly).commands;
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(ArgsOf(only[0]), (Strings{"XACK", "s", "g", "1-1", "1-2"}));
  auto ackdel = kOps.Ack(ids, AckMode::kAckDel).commands;
  ASSERT_EQ(ackdel.size(), 1u);
  EXPECT_EQ(ArgsOf(ackdel[0]), (Strings{"XACKDEL", "s", "g", "ACKED", "IDS", "2", "1-1", "1-2"}));
  auto both = kOps.Ack(ids, AckMode::kAckThenDelete).commands;
  ASSERT_EQ(both.size(), 4u);
  EXPECT_EQ(ArgsOf(both[0]), Strings{"MULTI"});
  EXPECT_EQ(ArgsOf(both[1]), (Strings{"XACK", "s", "g", "1-1", "1-2"}));
  EXPECT_EQ(ArgsOf(both[2]), (Strings{"XDEL", "s", "1-1", "1-2"}));
  EXPECT_EQ(ArgsOf(both[3]), Strings{"EXEC"});
}

TEST(RedisOpsTest, AckErrorsInsideExecAreErrors) {
  const std::string ok = "+OK\r\n", queued = "+QUEUED\r\n";
  EXPECT_TRUE(SubscriptionOps::ParseAck(RepliesOf({Int(2)})).ok());
  EXPECT_TRUE(
      SubscriptionOps::ParseAck(RepliesOf({ok, queued, queued, Arr({Int(2), Int(2)})})).ok());
  // XACK applied, XDEL failed inside EXEC (no rollback): the group is not settled.
  auto inner = SubscriptionOps::ParseAck(
      RepliesOf({ok, queued, queued, Arr({Int(2), Err("OOM command not allowed")})}));
  EXPECT_TRUE(inner.IsServerError("OOM")) << inner.message();
  auto aborted = SubscriptionOps::ParseAck(
      RepliesOf({ok, Err("NOPERM no"), queued, Err("EXECABORT Transaction discarded")}));
  EXPECT_TRUE(aborted.IsServerError("NOPERM")) << aborted.message();
}

TEST(RedisOpsTest, ScriptsAreCalledWithStreamGroupConsumerAndIds) {
  const Strings ids = {"1-1", "1-2"};
  EXPECT_EQ(ArgsOf(kOps.KeepAlive(ids)),
            (Strings{"EVALSHA", KeepAliveScript().sha(), "1", "s", "g", "c1", "1-1", "1-2"}));
  EXPECT_EQ(ArgsOf(kOps.RetryClaim(ids))[1], RetryClaimScript().sha());
  EXPECT_EQ(ArgsOf(kOps.UndoReads(ids))[1], UndoReadsScript().sha());
  StreamEntry entry;
  entry.id = "1-1";
  entry.fields = {{"n", "1"}};
  auto args = ArgsOf(
      kOps.DeadLetter({"s:dlq", 1000}, entry, {"rejected", "422", "bad", 1, 5}, AckMode::kAckDel));
  EXPECT_EQ(Strings(args.begin(), args.begin() + 12),
            (Strings{"EVALSHA", DeadLetterScript().sha(), "2", "s", "s:dlq", "g", "c1", "1-1",
                     "ackdel", "1000", "n", "1"}));
  EXPECT_EQ(args[12], "streamcar.stream");
  EXPECT_EQ(ArgsOf(kOps.OwnedAck("1-1", AckMode::kAckThenDelete)),
            (Strings{"EVALSHA", OwnedAckScript().sha(), "1", "s", "g", "c1", "1-1", "ackxdel"}));
  EXPECT_EQ(SettleScripts().size(), 5u);
}

// The two-step dead letter's XADD writes what the one-step script writes (SPEC 8).
TEST(RedisOpsTest, DeadLetterAddIsTheScriptsRecord) {
  StreamEntry entry;
  entry.id = "1-1";
  entry.fields = {{"n", "1"}};
  const DeadLetterMeta meta{"rejected", "422", "bad", 1, 5};
  auto script = ArgsOf(kOps.DeadLetter({"s:dlq", 1000}, entry, meta, AckMode::kAckOnly));
  auto add = ArgsOf(DeadLetterAdd({"s:dlq", 1000}, "s", "g", entry, meta));
  EXPECT_EQ(Strings(add.begin(), add.begin() + 6),
            (Strings{"XADD", "s:dlq", "MAXLEN", "~", "1000", "*"}));
  EXPECT_EQ(Strings(add.begin() + 6, add.end()), Strings(script.begin() + 10, script.end()))
      << "the fields after the script's arguments";
  EXPECT_EQ(ArgsOf(DeadLetterAdd({"s:dlq", 0}, "s", "g", entry, meta))[2], "*") << "no MAXLEN";
}

TEST(RedisOpsTest, OwnedAckAndStillOursReplies) {
  EXPECT_EQ(SubscriptionOps::ParseOwnedAck(ReplyOf(Int(1)).view()).value(), true);
  EXPECT_EQ(SubscriptionOps::ParseOwnedAck(ReplyOf(Int(0)).view()).value(), false);
  EXPECT_FALSE(SubscriptionOps::ParseOwnedAck(ReplyOf(Err("NOSCRIPT x")).view()).ok());
  EXPECT_FALSE(SubscriptionOps::ParseOwnedAck(ReplyOf(Int(2)).view()).ok());
  const std::string row = Arr({Arr({Bulk("1-1"), Bulk("c1"), Int(5), Int(1)})});
  EXPECT_EQ(SubscriptionOps::ParseStillOurs(ReplyOf(row).view(), "1-1").value(), true);
  EXPECT_EQ(SubscriptionOps::ParseStillOurs(ReplyOf(Arr({})).view(), "1-1").value(), false);
  EXPECT_FALSE(SubscriptionOps::ParseStillOurs(ReplyOf(Err("NOGROUP x")).view(), "1-1").ok());
}

TEST(RedisOpsTest, ScriptReplies) {
  auto claimed = SubscriptionOps::ParseRetryClaim(
      ReplyOf(Arr({Arr({EntryResp("1-1", {"n", "1"})}), Arr({Bulk("1-2")})})).view());
  ASSERT_TRUE(claimed.ok());
  ASSERT_EQ(claimed->entries.size(), 1u);
  EXPECT_EQ(claimed->entries[0].id, "1-1");
  EXPECT_EQ(claimed->lost_ids, Strings{"1-2"});
  EXPECT_EQ(claimed->entries[0].attempts, 0) << "no counts in the reply: unknown";
  // The script's third element: the pending list's count of each id claimed.
  auto counted = SubscriptionOps::ParseRetryClaim(
      ReplyOf(Arr({Arr({EntryResp("1-1", {"n", "1"})}), Arr({}), Arr({Bulk("1-1"), Int(7)})}))
          .view());
  ASSERT_TRUE(counted.ok());
  ASSERT_EQ(counted->entries.size(), 1u);
  EXPECT_EQ(counted->entries[0].attempts, 7);
  // Nothing was ours: Lua's empty table comes back as an empty array.
  auto none = SubscriptionOps::ParseRetryClaim(ReplyOf(Arr({Arr({}), Arr({Bulk("1-2")})})).view());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->entries.empty());
  EXPECT_TRUE(SubscriptionOps::ParseRetryClaim(ReplyOf(Err("NOSCRIPT No matching script")).view())
                  .status()
                  .IsServerError("NOSCRIPT"));

  auto lost = SubscriptionOps::ParseIds(ReplyOf(Arr({Bulk("1-2"), Bulk("1-3")})).view());
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(*lost, (Strings{"1-2", "1-3"}));
  EXPECT_FALSE(SubscriptionOps::ParseIds(ReplyOf(Err("BUSY script")).view()).ok());

  EXPECT_EQ(*SubscriptionOps::ParseDeadLetter(ReplyOf(Int(1)).view()), DeadLetterResult::kWritten);
  EXPECT_EQ(*SubscriptionOps::ParseDeadLetter(ReplyOf(Int(0)).view()), DeadLetterResult::kNotOurs);
  EXPECT_TRUE(SubscriptionOps::ParseDeadLetter(ReplyOf(Err("WRONGTYPE Operation")).view())
                  .status()
                  .IsServerError("WRONGTYPE"));
  EXPECT_EQ(SubscriptionOps::ParseDeadLetter(ReplyOf(Int(7)).view()).status().code(),
            StatusCode::kProtocol);

  EXPECT_EQ(*SubscriptionOps::ParseCount(ReplyOf(Int(3)).view()), 3);
  EXPECT_FALSE(SubscriptionOps::ParseCount(ReplyOf(Err("ERR x")).view()).ok());
}

TEST(RedisOpsTest, EnsureGroupKeepsAnExistingGroupAndRefusesAnotherType) {
  EXPECT_EQ(ArgsOf(kOps.EnsureGroup("$")),
            (Strings{"XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"}));
  EXPECT_TRUE(kOps.ParseEnsureGroup(ReplyOf("+OK\r\n").view()).ok());
  EXPECT_TRUE(
      kOps.ParseEnsureGroup(ReplyOf(Err("BUSYGROUP Consumer Group name already exists")).view())
          .ok());
  Status wrong = kOps.ParseEnsureGroup(ReplyOf(Err("WRONGTYPE Operation against a key")).view());
  EXPECT_EQ(wrong.code(), StatusCode::kFatal);
  EXPECT_NE(wrong.message().find("\"s\""), std::string::npos);
  Status oom = kOps.ParseEnsureGroup(ReplyOf(Err("OOM command not allowed")).view());
  EXPECT_EQ(oom.code(), StatusCode::kServerError);
  EXPECT_NE(oom.message().find("OOM"), std::string::npos);
}

TEST(RedisOpsTest, PendingIdsAndFetch) {
  auto ids = SubscriptionOps::ParsePendingIds(
      ReplyOf(Arr({Arr({Bulk("1-1"), Bulk("c1"), Int(5), Int(3)})})).view());
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (PendingIds{{"1-1", 3}}));
  const Strings wanted = {"1-1", "1-2"};
  auto fetched = SubscriptionOps::ParseFetch(
      RepliesOf({Arr({EntryResp("1-1", {"n", "1"})}), Arr({})}), wanted);
  ASSERT_TRUE(fetched.ok());
  ASSERT_EQ(fetched->size(), 2u);
  EXPECT_FALSE((*fetched)[0].deleted);
  EXPECT_EQ((*fetched)[1].id, "1-2");
  EXPECT_TRUE((*fetched)[1].deleted);
  EXPECT_FALSE(SubscriptionOps::ParseFetch(RepliesOf({Arr({}), Err("ERR x")}), wanted).ok());
}

TEST(RedisOpsTest, GroupInfoAndTheOneLagComputation) {
  auto groups = ReplyOf(Arr({Arr({Bulk("name"), Bulk("other"), Bulk("pending"), Int(9)}),
                             Arr({Bulk("name"), Bulk("g"), Bulk("pending"), Int(4),
                                  Bulk("last-delivered-id"), Bulk("7-0"), Bulk("lag"), Int(12)})}));
  auto info = ParseGroupInfo(groups.view(), "g");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->found);
  EXPECT_EQ(info->pending, 4);
  EXPECT_EQ(info->last_delivered_id, "7-0");
  EXPECT_FALSE(NeedsLagCount(*info));
  Lag exact = LagOf(*info, std::nullopt);
  EXPECT_EQ(exact.value, 12);
  EXPECT_TRUE(exact.exact);
  EXPECT_EQ(*ParseGroupCount(groups.view()), 2);

  // Redis reports a nil lag: it must be counted, and the count is an estimate.
  auto unknown =
      ParseGroupInfo(ReplyOf(Arr({Arr({Bulk("name"), Bulk("g"), Bulk("last-delivered-id"),
                                       Bulk("7-0"), Bulk("lag"), Nil()})}))
                         .view(),
                     "g");
  ASSERT_TRUE(unknown.ok());
  EXPECT_TRUE(NeedsLagCount(*unknown));
  EXPECT_EQ(ArgsOf(LagCount("s", unknown->last_delivered_id, kGaugeLagCountCap)),
            (Strings{"XRANGE", "s", "(7-0", "+", "COUNT", "10000"}));
  Lag estimated =
      LagOf(*unknown, *ParseLagCount(ReplyOf(Arr({EntryResp("8-0", {"n", "1"})})).view()));
  EXPECT_EQ(estimated.value, 1);
  EXPECT_FALSE(estimated.exact);
  EXPECT_FALSE(ParseGroupInfo(ReplyOf(Arr({})).view(), "g")->found);

  EXPECT_EQ(*ParsePendingCount(ReplyOf(Arr({Int(4), Bulk("1-1"), Bulk("7-0"), Arr({})})).view()),
            4);
  EXPECT_TRUE(
      ParsePendingCount(ReplyOf(Err("NOGROUP x")).view()).status().IsServerError("NOGROUP"));
  // The summary's smallest id is the group's oldest pending entry (all consumers).
  auto oldest = ParsePendingOldest(
      ReplyOf(Arr({Int(4), Bulk("1764513000123-1"), Bulk("1764513999000-0"), Arr({})})).view());
  ASSERT_TRUE(oldest.ok());
  EXPECT_EQ(oldest->count, 4);
  EXPECT_EQ(oldest->oldest_ms, 1764513000123u);
  auto none = ParsePendingOldest(ReplyOf(Arr({Int(0), Nil(), Nil(), NilArray()})).view());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->count, 0);
  EXPECT_EQ(none->oldest_ms, std::nullopt);
  EXPECT_FALSE(ParsePendingOldest(ReplyOf(Arr({Int(2), Nil(), Nil(), NilArray()})).view()).ok());
  EXPECT_FALSE(ParsePendingOldest(ReplyOf(Arr({Int(2), Bulk("x-y"), Nil(), Nil()})).view()).ok());
  EXPECT_TRUE(
      ParsePendingOldest(ReplyOf(Err("NOGROUP x")).view()).status().IsServerError("NOGROUP"));
  EXPECT_TRUE(*ParseHasAckDel(ReplyOf(Arr({Arr({Bulk("xackdel"), Int(-5)})})).view()));
  EXPECT_FALSE(*ParseHasAckDel(ReplyOf(Arr({NilArray()})).view()));
  EXPECT_EQ(*ParseType(ReplyOf("+stream\r\n").view()), "stream");
}

// ROLE, as the two-step dead letter reads it (runtime/settlement.h): a master's connected
// replicas, a demoted node, or a reply that says neither.
TEST(ReplicaWaitTest, RoleSaysHowManyReplicasAMasterHasOrThatItIsNone) {
  const auto count = [](const std::string& resp) {
    return ParseReplicaCount(ReplyOf(resp).view());
  };
  const std::string replica = Arr({Bulk("10.0.0.2"), Bulk("6379"), Bulk("9")});
  EXPECT_EQ(*count(Arr({Bulk("master"), Int(9), Arr({replica, replica})})), 2);
  EXPECT_EQ(*count(Arr({Bulk("master"), Int(9), Arr({})})), 0);
  EXPECT_EQ(*count(Arr({Bulk("slave"), Bulk("10.0.0.1"), Int(6379), Bulk("connected"), Int(9)})),
            kNotAMaster);
  EXPECT_EQ(count(Arr({Bulk("master")})).status().code(), StatusCode::kProtocol)
      << "cut short: not a master without replicas";
  EXPECT_EQ(count(Arr({Bulk("master"), Int(9), Bulk("x")})).status().code(), StatusCode::kProtocol);
  EXPECT_EQ(count(Int(1)).status().code(), StatusCode::kProtocol);
  EXPECT_EQ(count(Err("NOPERM no")).status().code(), StatusCode::kServerError);
}

}  // namespace
}  // namespace streamcar::redis
