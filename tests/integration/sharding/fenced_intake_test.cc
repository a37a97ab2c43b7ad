// One shard of a sharded subscription read by its FencedIntake (SHARDING.md B5), made by its
// ShardOwnership, against a real redis-server: the takeover first, in id order, and done only
// once every pending entry is claimed; the wait on an empty shard; scripts forgotten and loaded
// again; and a newer owner's fence ending the intake, at the read and at the install.

#include "sidecar/sharding/fenced_intake.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sidecar/sharding/fenced_ops.h"
#include "sidecar/sharding/fenced_script.h"
#include "sidecar/sharding/shard_ownership.h"
#include "tests/integration/intake_harness.h"
#include "tests/support/redis_server.h"

namespace streamcar::sharding {
namespace {

using namespace runtime::intake_testing;  // NOLINT: the harness and its helpers
using runtime::EntryRef;
using testing::RedisServer;

// This member's grant of the shard "orders" (the harness's subscription) under `token`.
std::shared_ptr<const ShardOwnership> Shard(int64_t token) {
  return std::make_shared<ShardOwnership>(ShardOwnership::Grant{0, token, "member-c1", 1},
                                          ShardOwnership::Callbacks{});
}

// Another member's fenced steps on the same shard.
FencedShardOps Member(int64_t token, const std::string& consumer) {
  return FencedShardOps("orders", "g", consumer, token, "member-" + consumer, 1);
}

TEST(ShardIntake, TakeoverDeliversEveryPendingEntryFirstInIdOrder) {
  RedisServer server;
  server.Run({"XGROUP", "CREATE", "orders", "g", "0", "MKSTREAM"});
  const std::string a = Add(server, "a");
  const std::string b = Add(server, "b");
  const std::string c = Add(server, "c");
  // The previous owner (another pod) read a and b; this pod once read c.
  server.Run({"XREADGROUP", "GROUP", "g", "pod-old", "COUNT", "2", "STREAMS", "orders", ">"});
  server.Run({"XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "orders", ">"});
  const std::string d = Add(server, "d");  // never read

  Harness h(server, 100, Sub(), Shard(5));
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 4; }));
  EXPECT_FALSE(h.refused_by_);
  for (const std::string& id : {a, b, c}) {
    EXPECT_EQ(Pending(server, id).consumer, "c1") << id;
    EXPECT_EQ(h.ledger().Find(id)->attempts, 2) << id << ": one more delivery";
  }
  EXPECT_EQ(h.ledger().Find(d)->attempts, 1);
  std::vector<std::string> order;
  for (const EntryRef& ref : h.ledger().TakeReady(10, h.loop_->clock().Now())) {
    order.push_back(ref.id);
  }
  EXPECT_EQ(order, (std::vector<std::string>{a, b, c, d}));
}

// SHARDING.md B7: the shard is STARTING until claim_all has taken its whole pending list; the
// group being ready is not the takeover being done.
TEST(ShardIntake, TheTakeoverIsDoneOnlyOnceEveryPendingEntryIsClaimed) {
  RedisServer server;
  server.Run({"XGROUP", "CREATE", "orders", "g", "0", "MKSTREAM"});
  for (int i = 0; i < 6; ++i) Add(server, std::to_string(i));
  server.Run({"XREADGROUP", "GROUP", "g", "pod-old", "COUNT", "6", "STREAMS", "orders", ">"});

  Harness h(server, /*capacity=*/2, Sub(), Shard(5));
  h.source().Start();
  // The first page filled the ledger: the group is ready, the takeover is not done.
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 2; }));
  h.RunFor(Millis(200));
  EXPECT_EQ(h.group_ready_, 1);
  EXPECT_EQ(h.drained_, 0) << "four entries are still the previous owner's";
  EXPECT_FALSE(h.source().drained());
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 2 || h.drained_ > 0; }));
    h.Settle(server, 2);
    h.source().Poke();
  }
  ASSERT_TRUE(h.RunUntil([&] { return h.drained_ > 0; }));
  h.RunFor(Millis(100));
  EXPECT_EQ(h.drained_, 1) << "once";
  EXPECT_EQ(PendingCount(server), 0) << "every claimed entry was settled";
}

TEST(ShardIntake, AnEmptyShardIsWaitedOnWithoutTouchingItsGroup) {
  RedisServer server;
  Harness h(server, 100, Sub(), Shard(5));
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && Blocked(server); }));
  EXPECT_EQ(PendingCount(server), 0);
  const std::string a = Add(server, "a");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().held() == 1; }, Millis(900)))
      << "the wait wakes on the append, not after its block";
  EXPECT_EQ(Pending(server, a).consumer, "c1") << "taken by the fenced read";
  bool stopped = false;
  h.source().Stop([&] { stopped = true; });
  ASSERT_TRUE(h.RunUntil([&] { return stopped; }, Millis(900))) << "a stop ends the wait";
}

// SCRIPT FLUSH (or a restart after the connection loaded its scripts): the fenced read answers
// NOSCRIPT; the intake loads the scripts again on its connection and reads on.
TEST(ShardIntake, ForgottenScriptsAreLoadedAgainAndReadingGoesOn) {
  RedisServer server;
  Harness h(server, 100, Sub(), Shard(5));
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && Blocked(server); }));
  server.Run({"SCRIPT", "FLUSH"});
  const std::string a = Add(server, "a");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().Holds(a); }, Millis(3000)))
      << "the intake stalled on NOSCRIPT";
  const std::string b = Add(server, "b");
  ASSERT_TRUE(h.RunUntil([&] { return h.ledger().Holds(b); }, Millis(3000)));
  EXPECT_FALSE(h.fatal_);
  EXPECT_FALSE(h.refused_by_);
}

TEST(ShardIntake, ANewerOwnerFencesTheIntakeOff) {
  RedisServer server;
  Harness h(server, 100, Sub(), Shard(5));
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.source().drained() && Blocked(server); }));
  // Another member takes the shard over: its install raises the fence to 9.
  const FencedShardOps newer = Member(9, "pod-new");
  auto connection = server.Connect();
  for (const auto* script : FencedScripts()) {
    ASSERT_TRUE(connection->Run(script->Load()).ok());
  }
  ASSERT_TRUE(connection->Run(newer.EnsureGroup("0")).ok());
  const std::string a = Add(server, "a");  // wakes the wait; the fenced read is refused
  ASSERT_TRUE(h.RunUntil([&] { return h.refused_by_.has_value(); }));
  EXPECT_EQ(*h.refused_by_, 9);
  EXPECT_EQ(h.refused_op_, "read");
  EXPECT_EQ(h.ledger().held(), 0u);
  EXPECT_EQ(PendingCount(server), 0) << "the stale owner read nothing";
  EXPECT_FALSE(h.fatal_);
}

TEST(ShardIntake, AStaleInstallAtStartFencesTheIntakeOff) {
  RedisServer server;
  auto connection = server.Connect();
  for (const auto* script : FencedScripts()) {
    ASSERT_TRUE(connection->Run(script->Load()).ok());
  }
  ASSERT_TRUE(connection->Run(Member(9, "pod-new").EnsureGroup("0")).ok());
  Harness h(server, 100, Sub(), Shard(5));
  h.source().Start();
  ASSERT_TRUE(h.RunUntil([&] { return h.refused_by_.has_value(); }));
  EXPECT_EQ(*h.refused_by_, 9);
  EXPECT_EQ(h.refused_op_, "install");
  EXPECT_EQ(h.group_ready_, 0);
}

}  // namespace
}  // namespace streamcar::sharding
