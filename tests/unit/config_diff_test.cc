// SPEC 2's reload: which keys differ between two configurations, by their config path, and
// whether each may change while `run` runs (config/config_diff.h). Pure data: two files loaded.

#include "sidecar/config/config_diff.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sidecar/config/loader.h"

namespace streamcar::config {
namespace {

const char* const kBase = R"(version: 1
redis:
  url: redis://127.0.0.1:6379/0
  password: s3cret
consumer:
  name: pod-0
subscriptions:
  - stream: orders
    group: billing
    start: beginning
    handler: { url: "http://127.0.0.1:8080/orders", headers: { X-Api-Key: "k1" } }
    retention: { max_len: 100 }
  - stream: sharded
    group: g
    start: new
    handler: { url: "http://127.0.0.1:8080/sharded" }
    sharding: { shards: 4 }
)";

Config Load(const std::string& yaml) {
  auto config = LoadConfigText(yaml, "test.yaml",
                               [](const std::string&) { return std::optional<std::string>(); });
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? *config : Config{};
}

// kBase with `from` replaced by `to` (which must occur once).
Config Edited(const std::string& from, const std::string& to) {
  std::string yaml = kBase;
  const size_t at = yaml.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(yaml.find(from, at + 1), std::string::npos) << from;
  return Load(yaml.replace(at, from.size(), to));
}

std::vector<std::string> Paths(const std::vector<ConfigChange>& changes) {
  std::vector<std::string> out;
  for (const auto& change : changes) out.push_back(change.path);
  return out;
}

TEST(ConfigDiffTest, TheSameFileChangesNothing) {
  EXPECT_TRUE(DiffConfig(Load(kBase), Load(kBase)).empty());
}

TEST(ConfigDiffTest, ADefaultSpelledOutIsNoChange) {
  // handler.timeout's default is 10s: writing it changes no effective value.
  auto changes = DiffConfig(Load(kBase), Edited("headers:", "timeout: 10s, headers:"));
  EXPECT_TRUE(changes.empty()) << ChangedKeys(changes);
}

TEST(ConfigDiffTest, AHandlerUrlIsLiveAndNamedByItsPath) {
  auto changes = DiffConfig(Load(kBase), Edited("8080/orders", "8081/orders"));
  ASSERT_EQ(Paths(changes), std::vector<std::string>{"subscriptions[0].handler.url"});
  EXPECT_TRUE(changes[0].live);
  EXPECT_EQ(RefusedKeys(changes), "");
}

TEST(ConfigDiffTest, PoliciesRetryCadencesAndShutdownAreLive) {
  auto next = Load(kBase);
  next.subscriptions[0].handler.concurrency = 3;
  next.subscriptions[0].retry.max_attempts = 9;
  next.subscriptions[0].claim.interval = Millis(2000);
  next.subscriptions[0].retention.interval = Millis(5000);
  next.subscriptions[0].circuit_breaker.failures = 4;
  next.subscriptions[0].dead_letter.max_len = 10;
  next.shutdown.drain_timeout = Millis(3000);
  auto changes = DiffConfig(Load(kBase), next);
  EXPECT_EQ(Paths(changes),
            (std::vector<std::string>{
                "shutdown.drain_timeout", "subscriptions[0].handler.concurrency",
                "subscriptions[0].retry.max_attempts", "subscriptions[0].circuit_breaker.failures",
                "subscriptions[0].dead_letter.max_len", "subscriptions[0].claim.interval",
                "subscriptions[0].retention.interval"}));
  EXPECT_EQ(RefusedKeys(changes), "");
}

TEST(ConfigDiffTest, TheRedisUrlAndConsumerNameAreRefused) {
  auto next = Edited("6379/0", "6380/0");
  next.consumer_name = "pod-1";
  auto changes = DiffConfig(Load(kBase), next);
  EXPECT_EQ(RefusedKeys(changes), "redis.url, consumer.name");
  for (const auto& change : changes) EXPECT_FALSE(change.why_not.empty()) << change.path;
}

TEST(ConfigDiffTest, SecretsCheckPrintsMaskedAreComparedByValue) {
  auto next = Edited("password: s3cret", "password: other");
  next.subscriptions[0].handler.headers["X-Api-Key"] = "k2";
  next.subscriptions[0].handler.auth.hmac_secret = "h";
  auto changes = DiffConfig(Load(kBase), next);
  EXPECT_EQ(ChangedKeys(changes),
            "subscriptions[0].handler.auth.hmac_secret, redis.password, "
            "subscriptions[0].handler.headers.X-Api-Key");
  EXPECT_EQ(RefusedKeys(changes), "redis.password");
}

TEST(ConfigDiffTest, TheSetOfSubscriptionsIsRefused) {
  auto fewer = Load(kBase);
  fewer.subscriptions.pop_back();
  EXPECT_EQ(RefusedKeys(DiffConfig(Load(kBase), fewer)), "subscriptions");
  auto renamed = Edited("stream: orders", "stream: invoices");
  const std::string refused = RefusedKeys(DiffConfig(Load(kBase), renamed));
  EXPECT_NE(refused.find("subscriptions[0].stream"), std::string::npos) << refused;
}

TEST(ConfigDiffTest, ASubscriptionsDeadLetterStreamIsRefused) {
  auto changes = DiffConfig(
      Load(kBase), Edited("    retention:", "    dead_letter: { stream: x }\n    retention:"));
  EXPECT_EQ(RefusedKeys(changes), "subscriptions[0].dead_letter.stream");
}

TEST(ConfigDiffTest, EveryKeyOfAShardedSubscriptionIsRefusedWithItsReason) {
  auto changes = DiffConfig(Load(kBase), Edited("8080/sharded", "8081/sharded"));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_FALSE(changes[0].live);
  EXPECT_EQ(changes[0].path, "subscriptions[1].handler.url");
  EXPECT_NE(changes[0].why_not.find("sharded"), std::string::npos) << changes[0].why_not;
}

TEST(ConfigDiffTest, ALiveAndARefusedChangeTogetherAreRefused) {
  auto next = Edited("8080/orders", "8081/orders");
  next.redis.command_timeout = Millis(1000);
  auto changes = DiffConfig(Load(kBase), next);
  EXPECT_EQ(ChangedKeys(changes), "redis.command_timeout, subscriptions[0].handler.url");
  EXPECT_EQ(RefusedKeys(changes), "redis.command_timeout");
}

// Whatever DiffConfig calls live, TakeLiveKeys carries over: after it, nothing differs.
TEST(ConfigDiffTest, TakeLiveKeysCarriesEveryLiveKey) {
  auto next = Load(kBase);
  Subscription& sub = next.subscriptions[0];
  sub.start = "new";
  sub.handler.url = "http://127.0.0.1:9/x";
  sub.handler.timeout = Millis(1234);
  sub.handler.concurrency = 2;
  sub.handler.headers["X-Other"] = "v";
  sub.handler.auth.hmac_secret = "h";
  sub.retry.max_backoff = Millis(7000);
  sub.circuit_breaker.failures = 3;
  sub.dead_letter.max_len = 5;
  sub.claim.min_idle = Millis(90000);
  sub.ordering.key_field = "customer";
  sub.ack.delete_entries = true;
  sub.retention.max_age = Millis(3'600'000);
  sub.routes.push_back(RouteConfig{"kind", std::string("a"), std::nullopt, "", true});
  const Config running = Load(kBase);
  auto changes = DiffConfig(running, next);
  ASSERT_GE(changes.size(), 13u) << ChangedKeys(changes);
  EXPECT_EQ(RefusedKeys(changes), "");
  Config taken = running;
  TakeLiveKeys(next.subscriptions[0], &taken.subscriptions[0]);
  EXPECT_EQ(ChangedKeys(DiffConfig(taken, next)), "");
}

}  // namespace
}  // namespace streamcar::config
