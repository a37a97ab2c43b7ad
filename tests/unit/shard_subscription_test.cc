// One shard of a sharded subscription as the loop that runs it sees it (ShardSubscription,
// SubscriptionLoop::CapacityFor): its own stream and dead letters, one request in flight, a share
// of the subscription's byte budget, and enough read-ahead that a shard at batch_size 1 does not
// read once per entry.

#include "sidecar/sharding/shard_subscription.h"

#include <gtest/gtest.h>

#include "sidecar/runtime/subscription_loop.h"

namespace streamcar::sharding {
namespace {

config::Subscription Sharded(int shards) {
  config::Subscription sub;
  sub.name = "orders/billing";
  sub.stream = "orders";
  sub.group = "billing";
  sub.handler.concurrency = 16;
  sub.handler.batch_size = 1;
  sub.handler.max_held_bytes = 32 << 20;
  sub.sharding.shards = shards;
  sub.sharding.key_pattern = "orders:{%d}";
  return sub;
}

TEST(ShardSubscription, AShardHasItsOwnKeysOneRequestInFlightAndAShareOfTheByteBudget) {
  const config::Subscription shard = ShardSubscription(Sharded(16), 3);
  EXPECT_EQ(shard.stream, "orders:{3}");
  EXPECT_EQ(shard.dead_letter.stream, "orders:{3}:dlq");
  EXPECT_EQ(shard.handler.concurrency, 1);
  EXPECT_EQ(shard.handler.max_held_bytes, uint64_t{2} << 20) << "32 MiB over 16 shards";
  // A member holding every shard holds no more than the subscription's budget.
  EXPECT_LE(shard.handler.max_held_bytes * 16, uint64_t{32} << 20);
  EXPECT_EQ(ShardSubscription(Sharded(4096), 0).handler.max_held_bytes, uint64_t{8192});
}

TEST(ShardSubscription, OrderingByKeyKeepsTheConcurrency) {
  config::Subscription sub = Sharded(4);
  sub.ordering.key_field = "account";
  EXPECT_EQ(ShardSubscription(sub, 0).handler.concurrency, 16);
}

// At batch_size 1 a shard's four requests' worth would be 4 entries: a fenced read (two round
// trips) per entry or so. It reads ahead as a plain subscription of concurrency 16 would.
TEST(ShardSubscription, AShardReadsAheadAtLeastSixtyFourEntries) {
  using runtime::SubscriptionLoop;
  EXPECT_EQ(SubscriptionLoop::CapacityFor(ShardSubscription(Sharded(16), 0)),
            SubscriptionLoop::kShardReadAhead);
  config::Subscription wide = Sharded(16);
  wide.handler.batch_size = 100;
  EXPECT_EQ(SubscriptionLoop::CapacityFor(ShardSubscription(wide, 0)), 400u);
  config::Subscription plain = Sharded(0);
  EXPECT_EQ(SubscriptionLoop::CapacityFor(plain), 64u);
  plain.handler.concurrency = 2;
  EXPECT_EQ(SubscriptionLoop::CapacityFor(plain), 8u) << "no floor without sharding";
}

}  // namespace
}  // namespace streamcar::sharding
