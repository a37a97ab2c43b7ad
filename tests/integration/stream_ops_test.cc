// The stream operations against a real redis-server: what each command really does to the PEL.

#include "sidecar/redis/stream_ops.h"

#include <gtest/gtest.h>

#include <map>
#include <span>
#include <thread>

#include "sidecar/redis/settle_scripts.h"
#include "sidecar/redis/sync_ops.h"
#include "tests/support/redis_server.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::redis {
namespace {

using testing::RedisServer;

class StreamOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    session_ = std::make_unique<Session>(server_.ClientOptions(), "test", &health_);
    StopSignal stop;
    ASSERT_TRUE(session_->EnsureConnected(stop).ok());
    for (const auto* script : SettleScripts()) ASSERT_TRUE(session_->Run(script->Load()).ok());
  }

  std::string Add(const std::string& stream, std::vector<std::string> fields) {
    std::vector<std::string> args = {"XADD", stream, "*"};
    args.insert(args.end(), fields.begin(), fields.end());
    return std::string(server_.Run(args).view().Str());
  }

  // The delivery count of our pending entry `id`; -1 when it is not ours (XPENDING's own count,
  // the one the pair DeliveryCounts/ApplyDeliveryCounts reads).
  int DeliveryCount(const PlainOps& ops, const std::string& id) {
    StreamEntry entry;
    entry.id = id;
    auto reply = sync::RunCommand(*session_, ops.DeliveryCounts(std::span(&entry, 1)).at(0));
    EXPECT_TRUE(reply.ok());
    return reply.ok() && reply->view().Size() == 1 ? static_cast<int>(reply->view()[0][3].Integer())
                                                   : -1;
  }

  RedisServer server_;
  RedisHealth health_;
  std::unique_ptr<Session> session_;
};

TEST_F(StreamOpsTest, EnsureGroupCreatesOnceAndKeepsPosition) {
  PlainOps ops("orders", "billing", "c1");
  ASSERT_TRUE(sync::EnsureGroup(*session_, ops, "$").ok());
  EXPECT_EQ(server_.Run({"EXISTS", "orders"}).view().Integer(), 1);  // MKSTREAM
  Add("orders", {"a", "1"});
  ASSERT_TRUE(sync::EnsureGroup(*session_, ops, "0").ok());  // BUSYGROUP is success
  auto entries = sync::ReadNew(*session_, ops, 10, Millis(10));
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), 1u);  // the group kept its "$" position, then saw the new entry
}

TEST_F(StreamOpsTest, WrongTypeIsFatalAndTheKeyIsLeftAlone) {
  server_.Run({"SET", "orders", "not a stream"});
  PlainOps ops("orders", "billing", "c1");
  Status status = sync::EnsureGroup(*session_, ops, "$");
  EXPECT_EQ(status.code(), StatusCode::kFatal);
  EXPECT_NE(status.message().find("\"orders\""), std::string::npos);
  EXPECT_NE(status.message().find("WRONGTYPE"), std::string::npos);
  EXPECT_EQ(server_.Run({"GET", "orders"}).view().Str(), "not a stream");
}

TEST_F(StreamOpsTest, OwnPendingDrainCountsADeliveryAndAdvances) {
  PlainOps ops("s", "g", "c1");
  ASSERT_TRUE(sync::EnsureGroup(*session_, ops, "0").ok());
  std::string a = Add("s", {"n", "1"});
  std::string b = Add("s", {"n", "2"});
  ASSERT_EQ(sync::ReadNew(*session_, ops, 10, Millis(10))->size(), 2u);
  auto first = sync::ReadOwnPending(*session_, ops, "0", 1);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].id, a);
  EXPECT_EQ((*first)[0].attempts, 2);  // the history read counted a delivery
  auto second = sync::ReadOwnPending(*session_, ops, a, 10);
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].id, b);
  EXPECT_TRUE(sync::ReadOwnPending(*session_, ops, b, 10)->empty());
  EXPECT_EQ(DeliveryCount(ops, a), 2);  // the advancing cursor read it once, not again
}

TEST_F(StreamOpsTest, DeletedPendingEntriesComeBackAsNil) {
  PlainOps ops("s", "g", "c1");
  ASSERT_TRUE(sync::EnsureGroup(*session_, ops, "0").ok());
  std::string a = Add("s", {"n", "1"});
  ASSERT_EQ(sync::ReadNew(*session_, ops, 10, Millis(10))->size(), 1u);
  server_.Run({"XDEL", "s", a});
  auto pending = sync::ReadOwnPending(*session_, ops, "0", 10);
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_TRUE((*pending)[0].deleted);
  EXPECT_TRUE((*pending)[0].fields.empty());
}

TEST_F(StreamOpsTest, KeepAliveResetsIdleWithoutCountingRetryClaimCounts) {
  PlainOps ops("s", "g", "c1");
  ASSERT_TRUE(sync::EnsureGroup(*session_, ops, "0").ok());
  std::string a = Add("s", {"n", "1"});
  sync::ReadNew(*session_, ops, 10, Millis(10));
  // The entry's idle time in ms, from XPENDING's extended form.
  auto idle_ms = [&] {
    auto reply = session_->Run(Command("XPENDING").Arg("s").Arg("g").Arg("-").Arg("+").Arg("10"));
    EXPECT_TRUE(reply.ok() && !reply->IsError() && reply->view().Size() == 1u);
    return reply.ok() && reply->view().Size() == 1u ? reply->view()[0][2].Integer() : -1;
  };
  ASSERT_TRUE(testing::Eventually([&] { return idle_ms() >= 1500; }, std::chrono::seconds(10)));
  const auto kept_at = SteadyClock::now();
  ASSERT_TRUE(session_->Run(ops.KeepAlive(std::vector<std::string>{a})).ok());
  const int64_t after = idle_ms();
  const auto since = std::chrono::duration_cast<Millis>(SteadyClock::now() - kept_at).count();
  // Reset: the idle time is no older than the keepalive (it would be >= 1500 otherwise).
  ASSERT_LT(since, 1500) << "the machine stalled too long to tell";
  EXPECT_LE(after, since + 5);
  EXPECT_EQ(DeliveryCount(ops, a), 1);
  auto claimed = session_->Run(ops.RetryClaim(std::vector<std::string>{a}));
  ASSERT_TRUE(claimed.ok());
  auto entries = PlainOps::ParseRetryClaim(claimed->view())->entries;
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].fields[0].second, "1");
  EXPECT_EQ(DeliveryCount(ops, a), 2);
}

TEST_F(StreamOpsTest, AutoClaimTakesIdleEntriesOfOthersWithCounts) {
  PlainOps dead("s", "g", "dead");
  PlainOps alive("s", "g", "alive");
  ASSERT_TRUE(sync::EnsureGroup(*session_, dead, "0").ok());
  std::string a = Add("s", {"n", "1"});
  std::string b = Add("s", {"n", "2"});
  ASSERT_EQ(sync::ReadNew(*session_, dead, 10, Millis(10))->size(), 2u);
  server_.Run({"XDEL", "s", b});
  std::this_thread::sleep_for(Millis(150));
  auto result = sync::AutoClaim(*session_, alive, Millis(100), "0-0", 10);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->next_cursor, "0-0");
  ASSERT_EQ(result->entries.size(), 1u);
  EXPECT_EQ(result->entries[0].id, a);
  EXPECT_EQ(result->entries[0].attempts, 2);
  ASSERT_EQ(result->deleted_ids.size(), 1u);
  EXPECT_EQ(result->deleted_ids[0], b);
}

// Review m5: the counts used to be read by range (XPENDING first last n+1024 me), so a claimed
// entry behind more than 1,024 of our own pending ids read attempts 1: max_attempts was missed.
TEST_F(StreamOpsTest, DeliveryCountsAreExactWhenOurIdsInterleave) {
  PlainOps dead("s", "g", "dead");
  PlainOps alive("s", "g", "alive");
  ASSERT_TRUE(sync::EnsureGroup(*session_, dead, "0").ok());
  const std::string first = Add("s", {"n", "first"});
  ASSERT_EQ(sync::ReadNew(*session_, dead, 1, Millis(10))->size(), 1u);
  constexpr int kOurs = 1100;
  for (int i = 0; i < kOurs; ++i) Add("s", {"n", std::to_string(i)});
  auto ours = sync::ReadNew(*session_, alive, kOurs, Millis(10));
  ASSERT_TRUE(ours.ok());
  ASSERT_EQ(ours->size(), static_cast<size_t>(kOurs));
  const std::string last = Add("s", {"n", "last"});
  ASSERT_EQ(sync::ReadNew(*session_, dead, 1, Millis(10))->size(), 1u);
  // The dead peer's two entries turn idle; ours are kept fresh, so only those two are claimed.
  auto idle_of = [&](const std::string& id) {
    auto row = server_.Run({"XPENDING", "s", "g", id, id, "1"});
    return row.view().Size() == 1 ? row.view()[0][2].Integer() : -1;
  };
  ASSERT_TRUE(testing::Eventually([&] { return idle_of(first) >= 300 && idle_of(last) >= 300; },
                                  std::chrono::seconds(10)));
  std::vector<std::string> our_ids;
  for (const auto& entry : *ours) our_ids.push_back(entry.id);
  auto lost = sync::KeepAlive(*session_, alive, our_ids);
  ASSERT_TRUE(lost.ok()) << lost.status().message();
  ASSERT_TRUE(lost->empty());
  auto result = sync::AutoClaim(*session_, alive, Millis(300), "0-0", 1000);
  ASSERT_TRUE(result.ok()) << result.status().message();
  std::map<std::string, int> attempts;
  for (const auto& entry : result->entries) attempts[entry.id] = entry.attempts;
  ASSERT_EQ(attempts.count(first), 1u);
  ASSERT_EQ(attempts.count(last), 1u);
  EXPECT_EQ(attempts[first], 2);  // read once by the peer, claimed once
  EXPECT_EQ(attempts[last], 2);
  EXPECT_EQ(DeliveryCount(alive, last), 2);
}

TEST_F(StreamOpsTest, DeadLetterWritesFieldsAndMetadataThenAcknowledges) {
  PlainOps ops("s", "g", "c1");
  ASSERT_TRUE(sync::EnsureGroup(*session_, ops, "0").ok());
  std::string a = Add("s", {"k", "v", "k", "w"});
  auto entries = sync::ReadNew(*session_, ops, 10, Millis(10));
  DeadLetterMeta meta{"rejected", "422", std::string(2000, 'e'), 1, 1700000000000};
  auto written =
      session_->Run(ops.DeadLetter({"s:dlq", 0}, (*entries)[0], meta, AckMode::kAckOnly));
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(written->view().Integer(), 1);
  auto dlq = server_.Run({"XRANGE", "s:dlq", "-", "+"});
  ASSERT_EQ(dlq.view().Size(), 1u);
  auto fields = dlq.view()[0][1];
  std::vector<std::string> flat;
  for (size_t i = 0; i < fields.Size(); ++i) flat.emplace_back(fields[i].Str());
  std::vector<std::string> expected = {"k",
                                       "v",
                                       "k",
                                       "w",
                                       "streamcar.stream",
                                       "s",
                                       "streamcar.id",
                                       a,
                                       "streamcar.group",
                                       "g",
                                       "streamcar.attempts",
                                       "1",
                                       "streamcar.reason",
                                       "rejected",
                                       "streamcar.status",
                                       "422",
                                       "streamcar.error",
                                       std::string(1024, 'e'),
                                       "streamcar.time",
                                       "1700000000000"};
  EXPECT_EQ(flat, expected);
  EXPECT_EQ(server_.Run({"XPENDING", "s", "g"}).view()[0].Integer(), 0);
}

TEST_F(StreamOpsTest, InfoReportsPendingAndLag) {
  PlainOps ops("s", "g", "c1");
  ASSERT_TRUE(sync::EnsureGroup(*session_, ops, "0").ok());
  for (int i = 0; i < 5; ++i) Add("s", {"n", std::to_string(i)});
  sync::ReadNew(*session_, ops, 2, Millis(10));
  auto info = sync::Info(*session_, ops.stream(), ops.group());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->pending, 2);
  ASSERT_TRUE(info->lag.has_value());
  EXPECT_EQ(*info->lag, 3);
  auto counted = sync::LagCount(*session_, ops.stream(), info->last_delivered_id, 100);
  EXPECT_EQ(*counted, 3);
}

TEST_F(StreamOpsTest, FeatureDetectionUsesCommandInfo) {
  auto has = sync::HasAckDel(*session_);
  ASSERT_TRUE(has.ok());
  // Compared with what the server does when asked to run XACKDEL, not with COMMAND INFO (what
  // the product itself asks). Redis 7.0 has none; Redis 8.2 and Valkey 9 do.
  auto ran = server_.RunAllowingError({"XACKDEL", "probe", "g", "ACKED", "IDS", "1", "1-1"});
  const bool unknown =
      ran.IsError() && ran.view().Str().find("unknown command") != std::string::npos;
  EXPECT_EQ(*has, !unknown) << ran.view().Str();
  PlainOps ops("s", "g", "c1");
  ASSERT_TRUE(sync::EnsureGroup(*session_, ops, "0").ok());
  EXPECT_EQ(*sync::GroupCount(*session_, ops.stream()), 1);
}

}  // namespace
}  // namespace streamcar::redis
