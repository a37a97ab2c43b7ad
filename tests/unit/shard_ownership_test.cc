// What a loop's ownership decides (runtime/ownership.h), as pure logic: a shard's grant makes the
// fenced steps, whose refusals it reads back (FENCED and STALE, naming the token installed), and
// says what differs for a shard's loop; a plain subscription's makes steps never refused so. And
// which step of a settlement batch a refusal ended (runtime/settle_refusal.h). The
// sources they make read against a real redis-server in runtime_integration_tests (plain) and
// tests/integration/sharding/fenced_intake_test.cc (a shard).

#include "sidecar/sharding/shard_ownership.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>

#include "sidecar/runtime/plain_ownership.h"
#include "sidecar/runtime/settle_refusal.h"
#include "sidecar/sharding/fenced_ops.h"
#include "tests/unit/resp_reply.h"

namespace streamcar::sharding {
namespace {

config::Subscription ShardSub() {
  config::Subscription sub;
  sub.name = "orders/billing";
  sub.stream = "orders:{3}";
  sub.group = "billing";
  return sub;
}

ShardOwnership Granted(ShardOwnership::Callbacks callbacks = {}) {
  return ShardOwnership(ShardOwnership::Grant{3, 17, "m1", 2}, std::move(callbacks));
}

TEST(ShardOwnership, MakesTheFencedStepsOfItsGrant) {
  auto ops = Granted().MakeOps(ShardSub(), "c1");
  ASSERT_NE(dynamic_cast<const FencedShardOps*>(ops.get()), nullptr);
  EXPECT_EQ(static_cast<const FencedShardOps&>(*ops).token(), 17);
  EXPECT_EQ(ops->stream(), "orders:{3}");
  EXPECT_EQ(ops->consumer(), "c1");
  EXPECT_TRUE(ops->EveryStepIsAScript());
}

TEST(ShardOwnership, ItsStepsReadTheFencesRefusalsAndNothingElse) {
  auto ops = Granted().MakeOps(ShardSub(), "c1");
  EXPECT_EQ(ops->RefusedOwnership(Status(StatusCode::kServerError, "FENCED 21")), 21);
  EXPECT_EQ(ops->RefusedOwnership(Status(StatusCode::kServerError, "STALE 4")), 4);
  EXPECT_EQ(ops->RefusedOwnership(Status(StatusCode::kServerError, "NOGROUP no group")),
            std::nullopt);
  EXPECT_EQ(ops->RefusedOwnership(Status(StatusCode::kServerError, "FENCED x")), std::nullopt);
  EXPECT_EQ(ops->RefusedOwnership(Status(StatusCode::kIo, "FENCED 3")), std::nullopt)
      << "only a server's refusal";
  EXPECT_EQ(ops->RefusedOwnership(Status::Ok()), std::nullopt);
}

TEST(ShardOwnership, SaysWhatDiffersForAShardsLoop) {
  const ShardOwnership owned = Granted();
  EXPECT_EQ(owned.LoopNameSuffix(), "/shard-3");
  EXPECT_TRUE(owned.OneLaneWithoutKeyField()) << "one request in flight per shard (B8)";
  EXPECT_FALSE(owned.MayReapConsumers());
  EXPECT_TRUE(owned.ReportsProgress());
  const std::optional<delivery::ShardStamp> stamp = owned.RequestStamp();
  ASSERT_TRUE(stamp.has_value());
  EXPECT_EQ(stamp->shard, 3);
  EXPECT_EQ(stamp->fence, 17);
}

TEST(ShardOwnership, ALostShardIsToldToTheMember) {
  int64_t installed = 0;
  std::string op;
  const ShardOwnership owned = Granted({nullptr, [&](int64_t by, std::string_view step) {
                                          installed = by;
                                          op = step;
                                        }});
  owned.Lost(21, "ack");
  EXPECT_EQ(installed, 21);
  EXPECT_EQ(op, "ack");
}

TEST(PlainOwnership, MakesPlainStepsThatNoRefusalEndsAndAPlainLoop) {
  const runtime::PlainOwnership& plain = runtime::PlainOwnership::Instance();
  config::Subscription sub = ShardSub();
  sub.stream = "orders";
  auto ops = plain.MakeOps(sub, "c1");
  EXPECT_FALSE(ops->EveryStepIsAScript());
  EXPECT_EQ(ops->RefusedOwnership(Status(StatusCode::kServerError, "FENCED 21")), std::nullopt)
      << "a stream of that name is not fenced: the text means nothing here";
  EXPECT_EQ(plain.LoopNameSuffix(), "");
  EXPECT_FALSE(plain.OneLaneWithoutKeyField());
  EXPECT_TRUE(plain.MayReapConsumers());
  EXPECT_FALSE(plain.ReportsProgress());
  EXPECT_FALSE(plain.RequestStamp().has_value());
}

using runtime::RefusedIn;
using runtime::SettlePlan;

// A batch of three steps: a keepalive (commands 0-1), acks (2), a dead letter (3).
SettlePlan ThreeSteps() {
  SettlePlan plan;
  plan.commands.resize(4, redis::Command("PING"));
  plan.spans.push_back({SettlePlan::Step::kKeepAlive, 0, 2, {}, {}});
  plan.spans.push_back({SettlePlan::Step::kAck, 2, 3, {}, {}});
  plan.spans.push_back({SettlePlan::Step::kDeadLetter, 3, 4, {}, {}});
  return plan;
}

redis::BatchResult Answers(const std::vector<std::string>& resp) {
  redis::BatchResult result;
  for (const auto& r : resp) result.replies.push_back(testing::ReplyOf(r));
  return result;
}

TEST(SettleRefusal, NamesTheFirstStepTheFenceRefusedAndItsToken) {
  auto ops = Granted().MakeOps(ShardSub(), "c1");
  using testing::Err;
  using testing::Int;
  auto refused = RefusedIn(*ops, ThreeSteps(),
                           Answers({Int(1), Int(0), Err("NOGROUP gone"), Err("STALE 30")}));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->installed, 30);
  EXPECT_EQ(refused->op, "dead_letter");
  refused =
      RefusedIn(*ops, ThreeSteps(), Answers({Int(1), Err("FENCED 21"), Err("FENCED 21"), Int(1)}));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->installed, 21);
  EXPECT_EQ(refused->op, "claim") << "the lease of claimed entries";
  EXPECT_FALSE(RefusedIn(*ops, ThreeSteps(), Answers({Int(1), Int(1), Err("NOGROUP x"), Int(1)})));
}

TEST(SettleRefusal, PlainStepsAreNeverRefusedSo) {
  auto ops = runtime::PlainOwnership::Instance().MakeOps(ShardSub(), "c1");
  EXPECT_FALSE(RefusedIn(
      *ops, ThreeSteps(),
      Answers({testing::Err("FENCED 21"), testing::Int(1), testing::Int(1), testing::Int(1)})));
}

}  // namespace
}  // namespace streamcar::sharding
