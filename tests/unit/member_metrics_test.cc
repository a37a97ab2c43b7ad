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

// streamcar_shard_stalled (SHARDING.md B6.1) is the owner's only, like the shard's lag: 0 from
// the grant, 1 while judged stalled, gone with the shard; a shard this member does not run has
// none.
TEST(MemberMetrics, AShardsStalledSeriesIsItsOwnersOnly) {
  Metrics metrics;
  MemberMetrics& member = metrics.ForMember("orders/billing");
  member.ForShard(3);
  const std::string series = "streamcar_shard_stalled{shard=\"3\",subscription=\"orders/billing\"}";
  EXPECT_NE(metrics.Serialize().find(series + " 0\n"), std::string::npos) << metrics.Serialize();
  member.SetShardStalled(3, true);
  member.SetShardStalled(4, true);  // not this member's: nothing to export
  EXPECT_NE(metrics.Serialize().find(series + " 1\n"), std::string::npos) << metrics.Serialize();
  EXPECT_EQ(metrics.Serialize().find("shard=\"4\""), std::string::npos) << metrics.Serialize();
  member.ForgetShard(3);
  EXPECT_EQ(metrics.Serialize().find("streamcar_shard_stalled{"), std::string::npos)
      << metrics.Serialize();
}

}  // namespace
}  // namespace streamcar::admin
