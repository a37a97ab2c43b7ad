// The `sharding:` block of a subscription (SPEC 9, SHARDING.md B1): its keys and defaults, the
// timing relations `check` enforces (each refusal names the key), and what its keys need.

#include <gtest/gtest.h>

#include "sidecar/config/loader.h"
#include "sidecar/keys/sharding_keys.h"

namespace streamcar::config {
namespace {

std::optional<std::string> NoEnv(const std::string&) { return std::nullopt; }

std::string Sharded(const std::string& sharding, const std::string& top = "",
                    const std::string& sub_extra = "") {
  return "version: 1\n" + top +
         "subscriptions:\n"
         "  - stream: orders\n"
         "    group: billing\n"
         "    start: beginning\n"
         "    handler: { url: http://127.0.0.1:8080/orders }\n" +
         sub_extra + "    sharding:\n" + sharding;
}

Config Load(const std::string& yaml) {
  auto config = LoadConfigText(yaml, "test.yaml", NoEnv);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? *config : Config{};
}

std::string ErrorOf(const std::string& yaml) {
  auto config = LoadConfigText(yaml, "test.yaml", NoEnv);
  EXPECT_FALSE(config.ok()) << "accepted:\n" << yaml;
  return config.ok() ? "" : config.status().message();
}

TEST(ShardingConfig, ABlockWithoutAShardCountIsRefusedNamingTheKey) {
  // SPEC 9: a sharding block makes the subscription sharded; silently plain would be a surprise.
  for (const std::string block : {"      instance_id: \"\"\n", "      {}\n"}) {
    const std::string error = ErrorOf(Sharded(block));
    EXPECT_NE(error.find("test.yaml:"), std::string::npos) << error;
    EXPECT_NE(error.find("subscriptions[0].sharding.shards"), std::string::npos) << error;
  }
  EXPECT_NE(ErrorOf(Sharded("      instance_id: pod-0\n")).find("required in a sharding block"),
            std::string::npos);
  Config plain = Load(
      "version: 1\nsubscriptions:\n  - stream: orders\n    group: billing\n"
      "    start: beginning\n    handler: { url: http://127.0.0.1:8080/orders }\n");
  EXPECT_FALSE(plain.subscriptions[0].sharding.enabled());
  // What `check` prints for a plain subscription reads back as one.
  EXPECT_FALSE(Load(Sharded("      shards: 0\n")).subscriptions[0].sharding.enabled());
}

// SPEC 4.6 is refused with a sharding block (docs/reaping.md says why), naming the key and the
// subscription; a plain subscription beside it is not the problem, and reaping off is fine.
TEST(ShardingConfig, ConsumerReapingIsRefusedWithAShardingBlock) {
  const std::string error = ErrorOf(Sharded("      shards: 4\n", "consumer: { reap_idle: 2h }\n"));
  EXPECT_NE(error.find("consumer.reap_idle"), std::string::npos) << error;
  EXPECT_NE(error.find("does not apply to sharded subscriptions"), std::string::npos) << error;
  EXPECT_NE(error.find("subscriptions[0]"), std::string::npos) << error;
  EXPECT_NE(error.find("orders/billing"), std::string::npos) << error;
  EXPECT_EQ(Load(Sharded("      shards: 4\n", "consumer: { reap_idle: 0s }\n")).consumer_reap_idle,
            Millis(0));
}

TEST(ShardingConfig, TheDocumentedDefaults) {
  Config c = Load(Sharded("      shards: 16\n"));
  const Subscription& sub = c.subscriptions[0];
  const ShardingConfig& s = sub.sharding;
  EXPECT_TRUE(s.enabled());
  EXPECT_EQ(s.shards, 16);
  EXPECT_EQ(sub.ShardKeyPattern(), "orders:{%d}");
  EXPECT_EQ(s.session_timeout, Millis(15000));
  EXPECT_EQ(s.heartbeat_interval, Millis(3000));
  EXPECT_EQ(s.rebalance_timeout, Millis(60000));
  EXPECT_EQ(s.drain_timeout, Millis(20000));
  EXPECT_EQ(s.initial_delay, Millis(3000));
  EXPECT_EQ(s.min_assignment_interval, Millis(1000));
  EXPECT_EQ(s.static_takeover, StaticTakeover::kImmediate);
  EXPECT_TRUE(s.instance_id.empty());
  EXPECT_EQ(s.stall_timeout, Millis(0)) << "stalled owners are judged only when asked (B6.1)";
  EXPECT_FALSE(s.revoke_stalled);
}

TEST(ShardingConfig, EveryKeyIsRead) {
  Config c = Load(Sharded(
      "      shards: 8\n      key_pattern: \"o:{%d}:x\"\n      instance_id: pod-3\n"
      "      session_timeout: 30s\n      heartbeat_interval: 5s\n      rebalance_timeout: 90s\n"
      "      drain_timeout: 25s\n      initial_delay: 0s\n      min_assignment_interval: 0s\n"
      "      static_takeover: wait\n",
      "shutdown: { drain_timeout: 30s }\n"));
  const ShardingConfig& s = c.subscriptions[0].sharding;
  EXPECT_EQ(c.subscriptions[0].ShardKeyPattern(), "o:{%d}:x");
  EXPECT_EQ(s.instance_id, "pod-3");
  EXPECT_EQ(s.session_timeout, Millis(30000));
  EXPECT_EQ(s.initial_delay, Millis(0));
  EXPECT_EQ(s.static_takeover, StaticTakeover::kWait);
}

// SHARDING.md B6.1: stalled owners. Each refusal names the key it is about.
TEST(ShardingConfig, StallKeysAreReadAndTheirRelationsEnforced) {
  const ShardingConfig s =
      Load(Sharded("      shards: 4\n      stall_timeout: 45s\n      revoke_stalled: true\n"))
          .subscriptions[0]
          .sharding;
  EXPECT_EQ(s.stall_timeout, Millis(45000));
  EXPECT_TRUE(s.revoke_stalled);
  const std::pair<std::string, std::string> cases[] = {
      {"      shards: 4\n      stall_timeout: -1s\n", "subscriptions[0].sharding.stall_timeout"},
      {"      shards: 4\n      revoke_stalled: true\n", "subscriptions[0].sharding.revoke_stalled"},
      {"      shards: 4\n      stall_timeout: 0s\n      revoke_stalled: true\n",
       "subscriptions[0].sharding.revoke_stalled"},
      {"      shards: 4\n      revoke_stalled: maybe\n",
       "subscriptions[0].sharding.revoke_stalled"},
  };
  for (const auto& [sharding, key] : cases) {
    const std::string error = ErrorOf(Sharded(sharding));
    EXPECT_NE(error.find(key), std::string::npos) << sharding << " -> " << error;
  }
  EXPECT_NE(ErrorOf(Sharded("      shards: 4\n      revoke_stalled: true\n")).find("needs"),
            std::string::npos);
  // Reporting alone needs no revoke.
  EXPECT_EQ(Load(Sharded("      shards: 4\n      stall_timeout: 2s\n"))
                .subscriptions[0]
                .sharding.stall_timeout,
            Millis(2000));
}

TEST(ShardingConfig, TheShardCountIsBounded) {
  EXPECT_NE(ErrorOf(Sharded("      shards: -1\n")).find("sharding.shards"), std::string::npos);
  EXPECT_NE(ErrorOf(Sharded("      shards: 4097\n")).find("sharding.shards"), std::string::npos);
  EXPECT_TRUE(Load(Sharded("      shards: 4096\n")).subscriptions[0].sharding.enabled());
}

TEST(ShardingConfig, TheTimingRelationsAreEnforcedNamingTheKey) {
  const std::pair<std::string, std::string> cases[] = {
      {"      shards: 4\n      heartbeat_interval: 6s\n", "sharding.heartbeat_interval"},
      {"      shards: 4\n      session_timeout: 12s\n", "redis.command_timeout"},
      {"      shards: 4\n      drain_timeout: 10s\n", "sharding.drain_timeout"},
      {"      shards: 4\n      rebalance_timeout: 26s\n", "sharding.rebalance_timeout"},
  };
  for (const auto& [sharding, key] : cases) {
    const std::string error = ErrorOf(Sharded(sharding));
    EXPECT_NE(error.find(key), std::string::npos) << sharding << " -> " << error;
  }
  const std::string shutdown =
      ErrorOf(Sharded("      shards: 4\n", "shutdown: { drain_timeout: 15s }\n"));
  EXPECT_NE(shutdown.find("shutdown.drain_timeout"), std::string::npos) << shutdown;
  // The relations at their limits are accepted.
  Load(Sharded("      shards: 4\n      heartbeat_interval: 5s\n      rebalance_timeout: 31s\n"));
}

TEST(ShardingConfig, AKeyPatternHasExactlyOneShardIndex) {
  EXPECT_NE(ErrorOf(Sharded("      shards: 4\n      key_pattern: orders\n")).find("%d"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Sharded("      shards: 4\n      key_pattern: \"o:{%d}:%d\"\n"))
                .find("exactly one %d"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Sharded("      shards: 4\n      key_pattern: \"o:{%s}\"\n")).find("%d"),
            std::string::npos);
}

TEST(ShardingConfig, InClusterModeTheIndexIsInsideTheHashTag) {
  const std::string cluster = "redis: { mode: cluster, nodes: [\"127.0.0.1:7000\"] }\n";
  const std::string error =
      ErrorOf(Sharded("      shards: 4\n      key_pattern: \"{orders}:%d\"\n", cluster));
  EXPECT_NE(error.find("hash tag"), std::string::npos) << error;
  Load(Sharded("      shards: 4\n", cluster));
  Load(Sharded("      shards: 4\n      key_pattern: \"{orders}:%d\"\n"));  // standalone: fine
}

TEST(ShardingConfig, DeadLettersGoToEachShardsOwnStream) {
  const std::string error =
      ErrorOf(Sharded("      shards: 4\n", "", "    dead_letter: { stream: failed }\n"));
  EXPECT_NE(error.find("dead_letter.stream"), std::string::npos) << error;
  EXPECT_NE(error.find("orders:{0}:dlq"), std::string::npos) << error;
}

TEST(ShardingConfig, TwoSubscriptionsNeverShareCoordinatorKeys) {
  const std::string yaml =
      "version: 1\n"
      "subscriptions:\n"
      "  - { stream: \"orders:eu\", group: billing, start: new,\n"
      "      handler: { url: \"http://127.0.0.1:8080/\" }, sharding: { shards: 2 } }\n"
      "  - { stream: orders, group: \"eu:billing\", start: new,\n"
      "      handler: { url: \"http://127.0.0.1:8080/\" }, sharding: { shards: 2 } }\n";
  const std::string error = ErrorOf(yaml);
  EXPECT_NE(error.find("sc:{orders:eu:billing}"), std::string::npos) << error;
}

TEST(ShardingConfig, ASharedStreamIsShardedAlikeAndNotArchivedByTheApi) {
  const std::string two =
      "version: 1\n"
      "subscriptions:\n"
      "  - { stream: orders, group: a, start: new,\n"
      "      handler: { url: \"http://127.0.0.1:8080/\" }, sharding: { shards: 2 } }\n"
      "  - { stream: orders, group: b, start: new,\n"
      "      handler: { url: \"http://127.0.0.1:8080/\" }, sharding: { shards: 4 } }\n";
  EXPECT_NE(ErrorOf(two).find("differently"), std::string::npos);
  const std::string archived =
      Sharded("      shards: 2\n", "archive: { url: \"sqlite:///tmp/a.db\" }\n") +
      "streams:\n  - { name: orders, archive: true }\n";
  EXPECT_NE(ErrorOf(archived).find("sharded"), std::string::npos);
  Config routed = Load(Sharded("      shards: 2\n") + "streams:\n  - { name: orders }\n");
  ASSERT_EQ(routed.streams.size(), 1u);
  EXPECT_EQ(routed.streams[0].shards, 2);
  EXPECT_EQ(routed.streams[0].shard_key_pattern, "orders:{%d}");
}

// SPEC 9: crc32(K) mod S, CRC-32/IEEE. 0xCBF43926 is the check value of "123456789".
TEST(ShardRoute, IsCrc32ModuloTheShardCount) {
  EXPECT_EQ(keys::ShardOf("123456789", 16), static_cast<int>(0xCBF43926u % 16));
  EXPECT_EQ(keys::ShardOf("123456789", 1000), static_cast<int>(0xCBF43926u % 1000));
  EXPECT_EQ(keys::ShardOf("", 7), 0);
  EXPECT_EQ(keys::ShardKey("orders:{%d}", 3), "orders:{3}");
}

}  // namespace
}  // namespace streamcar::config
