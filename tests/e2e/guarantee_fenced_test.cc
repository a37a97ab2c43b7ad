// The guarantee suite's sharded case (issue 33; docs/reliability.md): a fenced owner is refused,
// on every topology. One suite with tests/e2e/guarantee_test.cc, which instantiates it.

#include <rapidjson/document.h>

#include "sidecar/keys/sharding_keys.h"
#include "tests/e2e/guarantee_fixture.h"

namespace streamcar::testing {
namespace {

// (6) SHARDING.md B5, B5.1: a newer token installed under a running member (as a new owner's
// install would be, or a fence key moved forward by hand) makes the member's next fenced step on
// that shard refused by Redis: it stops the shard and reports the refusal; the coordinator's
// repair grants the shard again above the installed token, and the entry is delivered under it.
// Without the fence the entry would arrive under the member's old token, below the intruder's.
// `status` counts the refusal (C2 "fenced ops (10m)").
TEST_P(GuaranteeTest, AFencedOwnerIsRefused) {
  constexpr int kShards = 2;
  SubscriptionSpec spec{
      .handler_extra = "timeout: 1s",
      .extra = "    sharding: { shards: " + std::to_string(kShards) +
               ", session_timeout: 6s, heartbeat_interval: 500ms, rebalance_timeout: 8s, "
               "drain_timeout: 3s, initial_delay: 0s, min_assignment_interval: 0s }\n"};
  const TopologyConfig config = Config("c1", spec);
  auto sidecar = Start(config);
  const std::string sub = "subscription=\"orders\"";
  // Every takeover done (the member is STABLE only when all its shards are ACTIVE): the fence
  // moved below is then ahead of an installed one, and the refused step is a read.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string text = Metrics();
        return MetricValue(text, "streamcar_shards_owned", {sub}) == kShards &&
               MetricValue(text, "streamcar_coord_member_state", {sub, "state=\"stable\""}) == 1;
      },
      seconds(30)))
      << sidecar->Logs();
  const int shard = keys::ShardOf("k0", kShards);
  const std::string shard_key = keys::ShardKey(stream_ + ":{%d}", shard);
  const std::string fence_key = keys::FenceKey(shard_key, "billing");
  constexpr int64_t kIntruder = 1000000;
  topology_->Run(fence_key,
                 {"HSET", fence_key, "token", std::to_string(kIntruder), "member", "intruder"});
  // To that shard: the wake-up read sees it, the fenced read is refused.
  topology_->Run(shard_key, {"XADD", shard_key, "*", "key", "k0", "seq", "0"});

  ASSERT_TRUE(WaitUntil([&] { return All().size() == 1; }, seconds(20))) << sidecar->Logs();
  const Observed delivered = All()[0];
  EXPECT_EQ(delivered.stream, shard_key);
  EXPECT_GT(delivered.fence, kIntruder) << "granted again above the installed token";
  EXPECT_EQ(delivered.attempts, delivered.delivery_count);
  EXPECT_GE(MetricValue(Metrics(), "streamcar_fenced_ops_total", {sub, "op=\"read\""}), 1)
      << Metrics() << sidecar->Logs();
  ASSERT_TRUE(WaitUntil([&] { return Pending(shard_key) == 0; }, seconds(10)));

  const std::string path = WriteConfig(TopologyYaml(config));
  rapidjson::Document doc;
  CommandResult json;
  ASSERT_TRUE(WaitUntil(
      [&] {  // the refusal travels in the member's next heartbeat
        json = RunStreamcar({"status", "-c", path, "--json"});
        doc.Parse(json.out.c_str());
        return json.exit_code == 0 && doc.IsObject() &&
               doc["subscriptions"][0]["sharded"]["fenced_ops_last_10m"].GetInt64() >= 1;
      },
      seconds(10)))
      << json.err << json.out;
  // The read, and perhaps the first re-grant's install (STALE below the moved fence, B5.1).
  const int64_t refused = doc["subscriptions"][0]["sharded"]["fenced_ops_last_10m"].GetInt64();
  EXPECT_LE(refused, 2) << json.out;
  const auto table = RunStreamcar({"status", "-c", path});
  EXPECT_NE(table.out.find("fenced ops (10m): " + std::to_string(refused)), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("fenced_ops"), std::string::npos) << "the event is listed\n"
                                                             << table.out;
}

}  // namespace
}  // namespace streamcar::testing
