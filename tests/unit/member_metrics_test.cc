// A sharded subscription's totals (admin/member_metrics.h): what the shard loops report is
// published as the subscription's series.

#include "sidecar/admin/member_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/gauge.h>

namespace streamcar::admin {
namespace {

// streamcar_oldest_pending_seconds of a sharded subscription is the oldest over the shards this
// member owns (each shard has one owner: max across members is the group's oldest), and a shard
// given up no longer counts.
TEST(MemberMetrics, TheOldestPendingAgeIsTheOldestOverTheOwnedShards) {
  Metrics metrics;
  SubscriptionMetrics& subscription = metrics.ForSubscription("orders/billing");
  MemberMetrics& member = metrics.ForMember("orders/billing");
  SubscriptionMetrics& shard0 = member.ForShard(0);
  SubscriptionMetrics& shard1 = member.ForShard(1);
  // Each shard's age is its own, not the subscription's series.
  ASSERT_NE(shard0.oldest_pending, subscription.oldest_pending);
  ASSERT_NE(shard0.oldest_pending, shard1.oldest_pending);
  shard0.oldest_pending->Set(5);
  shard1.oldest_pending->Set(12.5);
  EXPECT_EQ(subscription.oldest_pending->Value(), 0);  // until published
  member.PublishTotals(0);
  EXPECT_EQ(subscription.oldest_pending->Value(), 12.5);
  member.ForgetShard(1);
  member.PublishTotals(0);
  EXPECT_EQ(subscription.oldest_pending->Value(), 5);
  shard0.oldest_pending->Set(0);
  member.PublishTotals(0);
  EXPECT_EQ(subscription.oldest_pending->Value(), 0);
  // One series per subscription: the shards' ages are not exported apart.
  const std::string text = metrics.Serialize();
  EXPECT_NE(text.find("streamcar_oldest_pending_seconds{subscription=\"orders/billing\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("streamcar_oldest_pending_seconds{shard="), std::string::npos) << text;
}

}  // namespace
}  // namespace streamcar::admin
