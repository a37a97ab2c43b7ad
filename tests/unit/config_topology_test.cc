// SPEC 8 in the configuration: redis.mode, redis.nodes, redis.sentinel, the default dead-letter
// stream of each mode and what `check` prints of them. The exact message of every rejected input
// is in config_guard_test.cc (BadInputs); here, what is accepted and what it means.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "sidecar/config/dead_letter_default.h"
#include "sidecar/config/loader.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/keys/stream_keys.h"

namespace streamcar::config {
namespace {

EnvLookup Env(std::map<std::string, std::string> values = {}) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

// `redis` (a block, indented 2 spaces) before subscriptions of the streams `streams`, the last
// one with an explicit dead-letter stream "explicit:dlq" when `explicit_dlq`.
std::string File(const std::string& redis, const std::vector<std::string>& streams = {"orders"},
                 bool explicit_dlq = false) {
  std::string yaml = "version: 1\n";
  if (!redis.empty()) yaml += "redis:\n" + redis;
  yaml += "subscriptions:\n";
  for (size_t i = 0; i < streams.size(); ++i) {
    yaml += "  - stream: \"" + streams[i] + "\"\n    group: g\n    start: new\n";
    yaml += "    handler: { url: \"http://127.0.0.1:8080/\" }\n";
    if (explicit_dlq && i + 1 == streams.size()) {
      yaml += "    dead_letter: { stream: \"explicit:dlq\" }\n";
    }
  }
  return yaml;
}

Config Load(const std::string& yaml, const EnvLookup& env = Env()) {
  auto config = LoadConfigText(yaml, "test.yaml", env);
  EXPECT_TRUE(config.ok()) << config.status().message() << "\n" << yaml;
  return config.ok() ? *config : Config{};
}

std::string ErrorOf(const std::string& yaml) {
  auto config = LoadConfigText(yaml, "test.yaml", Env());
  EXPECT_FALSE(config.ok()) << "accepted:\n" << yaml;
  return config.ok() ? "" : config.status().message();
}

const std::string kSentinel =
    "  mode: sentinel\n  sentinel:\n    master: mymaster\n"
    "    addresses: [\"s1:26379\", \"[::1]:26380\"]\n";

TEST(TopologyConfig, DefaultsAreAutoWithNoSeedsAndNoSentinel) {
  const Config config = Load(File(""));
  EXPECT_EQ(config.redis.mode, RedisMode::kAuto);
  EXPECT_TRUE(config.redis.nodes.empty());
  EXPECT_TRUE(config.redis.sentinel.master.empty());
  EXPECT_TRUE(config.redis.sentinel.addresses.empty());
  EXPECT_TRUE(config.redis.sentinel.username.empty());
  EXPECT_TRUE(config.redis.sentinel.password.empty());
}

TEST(TopologyConfig, ReadsEveryMode) {
  EXPECT_EQ(Load(File("  mode: auto\n")).redis.mode, RedisMode::kAuto);
  EXPECT_EQ(Load(File("  mode: standalone\n")).redis.mode, RedisMode::kStandalone);
  EXPECT_EQ(Load(File("  mode: cluster\n")).redis.mode, RedisMode::kCluster);
  EXPECT_EQ(Load(File(kSentinel)).redis.mode, RedisMode::kSentinel);
  // From a variable, as a chart sets it.
  EXPECT_EQ(
      Load(File("  mode: ${REDIS_MODE:-auto}\n"), Env({{"REDIS_MODE", "cluster"}})).redis.mode,
      RedisMode::kCluster);
}

TEST(TopologyConfig, ReadsClusterSeedsAsWritten) {
  const Config config =
      Load(File("  mode: cluster\n  url: rediss://10.0.0.5:6379\n"
                "  nodes: [\"10.0.0.6:6379\", \"redis-2.internal:7000\", \"[fd00::8]:6379\"]\n"));
  EXPECT_EQ(config.redis.nodes,
            (std::vector<std::string>{"10.0.0.6:6379", "redis-2.internal:7000", "[fd00::8]:6379"}));
  // Seeds under auto too (the server decides whether they are needed); null is an empty list.
  EXPECT_EQ(Load(File("  nodes: [\"10.0.0.6:6379\"]\n")).redis.nodes.size(), 1u);
  EXPECT_TRUE(Load(File("  mode: cluster\n  nodes:\n")).redis.nodes.empty());
  // The same port on another host, or another port on the same host, is another node.
  EXPECT_EQ(Load(File("  nodes: [\"a:1\", \"b:1\", \"a:2\"]\n")).redis.nodes.size(), 3u);
}

TEST(TopologyConfig, ReadsTheSentinelSettings) {
  const Config config =
      Load(File(kSentinel + "    username: sentry\n    password: ${SENTINEL_PASSWORD}\n"
                            "  url: rediss://app:pw@ignored:6379/2\n"),
           Env({{"SENTINEL_PASSWORD", "s3cret"}}));
  EXPECT_EQ(config.redis.sentinel.master, "mymaster");
  EXPECT_EQ(config.redis.sentinel.addresses, (std::vector<std::string>{"s1:26379", "[::1]:26380"}));
  EXPECT_EQ(config.redis.sentinel.username, "sentry");
  EXPECT_EQ(config.redis.sentinel.password, "s3cret");
  // The url's database is used with sentinel (only a cluster is database 0 only).
  EXPECT_EQ(config.redis.endpoint.db, 2);
  // A password without a user is the sentinels' default user.
  EXPECT_TRUE(LoadConfigText(File(kSentinel + "    password: pw\n"), "t", Env()).ok());
}

TEST(TopologyConfig, EmptySentinelValuesAreFineWithAnyMode) {
  // A chart always passes them; only a non-empty value needs mode: sentinel.
  const std::string empty =
      "  sentinel:\n    master: ${SENTINEL_MASTER:-}\n    addresses: []\n"
      "    username: \"${SENTINEL_USERNAME:-}\"\n    password: ${SENTINEL_PASSWORD:-}\n";
  for (const char* mode : {"auto", "standalone", "cluster"}) {
    const Config config = Load(File("  mode: " + std::string(mode) + "\n" + empty));
    EXPECT_TRUE(config.redis.sentinel.master.empty()) << mode;
  }
}

TEST(TopologyConfig, AutoAcceptsWhatOnlyAClusterWouldRefuse) {
  // A database other than 0 passes under auto: a cluster found at start refuses it then.
  EXPECT_EQ(Load(File("  url: redis://r:6379/3\n")).redis.endpoint.db, 3);
  // A unix socket under auto or standalone is a standalone server.
  EXPECT_EQ(Load(File("  url: unix:///run/redis.sock\n")).redis.mode, RedisMode::kAuto);
  EXPECT_EQ(
      Load(File("  mode: standalone\n  url: unix:///run/redis.sock?db=4\n")).redis.endpoint.db, 4);
  // A cluster over TLS, database 0 spelled out or not.
  EXPECT_TRUE(LoadConfigText(File("  mode: cluster\n  url: rediss://r:6379/0\n"), "t", Env()).ok());
}

TEST(TopologyConfig, RulesNameTheKeyAndTheLine) {
  // The exact texts are in config_guard_test.cc; here the file, the line and the path.
  EXPECT_EQ(ErrorOf(File("  url: redis://r:6379/2\n  mode: cluster\n")),
            "test.yaml:3: redis.url: database 2: a cluster has only database 0");
  EXPECT_EQ(ErrorOf(File("  nodes:\n    - \"a:6379\"\n    - \"a:6379\"\n")),
            "test.yaml:5: redis.nodes[1]: a:6379 is listed twice (also redis.nodes[0])");
  // The same node spelled the same way twice, even across IPv6 brackets' spelling.
  EXPECT_NE(ErrorOf(File("  nodes: [\"[::1]:1\", \"[::1]:1\"]\n")).find("listed twice"),
            std::string::npos);
}

// --- the default dead-letter stream ---------------------------------------------------------

TEST(TopologyConfig, DefaultDeadLetterStreamOfEachMode) {
  EXPECT_EQ(keys::DefaultDeadLetterStream("orders", false), "orders:dlq");
  EXPECT_EQ(keys::DefaultDeadLetterStream("orders", true), "{orders}:dlq");
  EXPECT_EQ(keys::DefaultDeadLetterStream("app:{feed}", true), "app:{feed}:dlq");
  EXPECT_EQ(keys::DefaultDeadLetterStream("app:{feed}", false), "app:{feed}:dlq");
  // Whatever the name, in a cluster the default shares the stream's slot (the atomic path).
  for (const char* stream : {"orders", "app:{feed}", "a}b", "{}x", "x{}", "{a"}) {
    EXPECT_EQ(keys::KeySlot(keys::DefaultDeadLetterStream(stream, true)), keys::KeySlot(stream))
        << stream;
    EXPECT_NE(keys::DefaultDeadLetterStream(stream, true), stream);
  }
}

TEST(TopologyConfig, StandaloneAndSentinelDefaultToStreamColonDlq) {
  for (const std::string& redis : {std::string("  mode: standalone\n"), kSentinel}) {
    const Config config = Load(File(redis, {"orders", "app:{feed}"}));
    ASSERT_EQ(config.subscriptions.size(), 2u);
    EXPECT_EQ(config.subscriptions[0].dead_letter.stream, "orders:dlq");
    EXPECT_TRUE(config.subscriptions[0].dead_letter.stream_defaulted);
    EXPECT_EQ(config.subscriptions[0].dead_letter.stream_if_cluster, "");
    EXPECT_EQ(config.subscriptions[1].dead_letter.stream, "app:{feed}:dlq");
  }
}

TEST(TopologyConfig, ClusterDefaultsToTheStreamsSlot) {
  const Config config = Load(File("  mode: cluster\n", {"orders", "app:{feed}", "x"}, true));
  ASSERT_EQ(config.subscriptions.size(), 3u);
  EXPECT_EQ(config.subscriptions[0].dead_letter.stream, "{orders}:dlq");
  EXPECT_TRUE(config.subscriptions[0].dead_letter.stream_defaulted);
  EXPECT_EQ(config.subscriptions[1].dead_letter.stream, "app:{feed}:dlq");
  EXPECT_TRUE(config.subscriptions[1].dead_letter.stream_defaulted);
  // An explicit name is kept, even in another slot (the two-step path).
  EXPECT_EQ(config.subscriptions[2].dead_letter.stream, "explicit:dlq");
  EXPECT_FALSE(config.subscriptions[2].dead_letter.stream_defaulted);
  for (const auto& sub : config.subscriptions) EXPECT_EQ(sub.dead_letter.stream_if_cluster, "");
}

TEST(TopologyConfig, AutoDefaultsAsStandaloneUntilSettled) {
  Config config = Load(File("", {"orders", "app:{feed}", "x"}, true));
  auto& orders = config.subscriptions[0].dead_letter;
  auto& feed = config.subscriptions[1].dead_letter;
  auto& explicit_dlq = config.subscriptions[2].dead_letter;
  EXPECT_EQ(orders.stream, "orders:dlq");
  EXPECT_TRUE(orders.stream_defaulted);
  EXPECT_EQ(orders.stream_if_cluster, "{orders}:dlq");
  EXPECT_EQ(feed.stream, "app:{feed}:dlq");
  EXPECT_EQ(feed.stream_if_cluster, "");  // the same name either way
  EXPECT_EQ(explicit_dlq.stream, "explicit:dlq");
  EXPECT_FALSE(explicit_dlq.stream_defaulted);
  EXPECT_EQ(explicit_dlq.stream_if_cluster, "");

  Config cluster = config;
  SettleDeadLetterDefaults(cluster, /*cluster=*/true);
  EXPECT_EQ(cluster.subscriptions[0].dead_letter.stream, "{orders}:dlq");
  EXPECT_EQ(cluster.subscriptions[0].dead_letter.stream_if_cluster, "");
  EXPECT_TRUE(cluster.subscriptions[0].dead_letter.stream_defaulted);
  EXPECT_EQ(cluster.subscriptions[1].dead_letter.stream, "app:{feed}:dlq");
  EXPECT_EQ(cluster.subscriptions[2].dead_letter.stream, "explicit:dlq");
  // Settling twice (run, then a reconnect) changes nothing.
  SettleDeadLetterDefaults(cluster, true);
  EXPECT_EQ(cluster.subscriptions[0].dead_letter.stream, "{orders}:dlq");

  Config standalone = config;
  SettleDeadLetterDefaults(standalone, /*cluster=*/false);
  EXPECT_EQ(standalone.subscriptions[0].dead_letter.stream, "orders:dlq");
  EXPECT_EQ(standalone.subscriptions[0].dead_letter.stream_if_cluster, "");
  EXPECT_EQ(standalone.subscriptions[2].dead_letter.stream, "explicit:dlq");
}

TEST(TopologyConfig, DefaultsDeadLetterStreamSetInDefaultsIsExplicit) {
  // `defaults.dead_letter.stream` names one stream for all: explicit, whatever the mode.
  const Config config = Load(
      "version: 1\nredis: { mode: cluster }\ndefaults: { dead_letter: { stream: shared } }\n"
      "subscriptions:\n  - { stream: orders, group: g, start: new, handler: { url: "
      "\"http://h/\" } }\n");
  EXPECT_EQ(config.subscriptions[0].dead_letter.stream, "shared");
  EXPECT_FALSE(config.subscriptions[0].dead_letter.stream_defaulted);
}

// --- check ----------------------------------------------------------------------------------

TEST(TopologyConfig, CheckPrintsModeNodesAndSentinelWithThePasswordMasked) {
  const std::string sentinel =
      EmitEffectiveYaml(Load(File(kSentinel + "    username: sentry\n    password: s3cret\n")));
  EXPECT_EQ(sentinel.find("s3cret"), std::string::npos) << sentinel;
  // After redis.tls, so that what check printed before SPEC 8 reads the same.
  EXPECT_NE(sentinel.find("    verify: true\n"
                          "  mode: sentinel\n"
                          "  nodes: []\n"
                          "  sentinel:\n"
                          "    master: mymaster\n"
                          "    addresses: [s1:26379, \"[::1]:26380\"]\n"
                          "    username: sentry\n"
                          "    password: \"***\"\n"
                          "consumer:\n"),
            std::string::npos)
      << sentinel;

  const std::string cluster = EmitEffectiveYaml(
      Load(File("  mode: cluster\n  nodes: [\"10.0.0.6:6379\", \"[fd00::8]:6379\"]\n")));
  EXPECT_NE(cluster.find("  mode: cluster\n  nodes: [10.0.0.6:6379, \"[fd00::8]:6379\"]\n"
                         "  sentinel:\n    master: \"\"\n    addresses: []\n    username: \"\"\n"
                         "    password: \"\"\n"),
            std::string::npos)
      << cluster;
}

TEST(TopologyConfig, CheckPrintsTheEffectiveDeadLetterStream) {
  // cluster: the same-slot name, no comment.
  const std::string cluster = EmitEffectiveYaml(Load(File("  mode: cluster\n")));
  EXPECT_NE(cluster.find("    dead_letter:\n      stream: \"{orders}:dlq\"\n      max_len: 0\n"),
            std::string::npos)
      << cluster;
  // standalone and sentinel: "<stream>:dlq", no comment.
  for (const std::string& redis : {std::string("  mode: standalone\n"), kSentinel}) {
    const std::string printed = EmitEffectiveYaml(Load(File(redis)));
    EXPECT_NE(printed.find("    dead_letter:\n      stream: orders:dlq\n      max_len: 0\n"),
              std::string::npos)
        << printed;
  }
  // auto: the standalone name, and what a cluster would make of it.
  const std::string automatic =
      EmitEffectiveYaml(Load(File("", {"orders", "app:{feed}", "x"}, true)));
  EXPECT_NE(automatic.find("    dead_letter:\n      stream: orders:dlq  # {orders}:dlq if the "
                           "server is a cluster\n      max_len: 0\n"),
            std::string::npos)
      << automatic;
  // ... only where the two differ, and never on an explicit name.
  EXPECT_NE(automatic.find("      stream: app:{feed}:dlq\n      max_len: 0\n"), std::string::npos)
      << automatic;
  EXPECT_NE(automatic.find("      stream: explicit:dlq\n      max_len: 0\n"), std::string::npos)
      << automatic;
  EXPECT_EQ(automatic.find("# app"), std::string::npos) << automatic;
  EXPECT_EQ(automatic.find("# explicit"), std::string::npos) << automatic;
  // The comment is for a reader only: the printed file loads as YAML, with the plain name.
  const Config again = Load(automatic);
  EXPECT_EQ(again.subscriptions[0].dead_letter.stream, "orders:dlq");
}

TEST(TopologyConfig, CheckOutputLoadsAgainWithTheSameMeaning) {
  for (const std::string& redis :
       {std::string("  mode: cluster\n  nodes: [\"10.0.0.6:6379\", \"[fd00::8]:6379\"]\n"),
        kSentinel + "    username: u\n    password: p\n", std::string("  mode: standalone\n")}) {
    const Config config = Load(File(redis, {"orders", "a}b"}));
    const std::string printed = EmitEffectiveYaml(config);
    // The sentinel password prints as "***": loaded again it is that text.
    const Config again = Load(printed);
    EXPECT_EQ(again.redis.mode, config.redis.mode);
    EXPECT_EQ(again.redis.nodes, config.redis.nodes);
    EXPECT_EQ(again.redis.sentinel.master, config.redis.sentinel.master);
    EXPECT_EQ(again.redis.sentinel.addresses, config.redis.sentinel.addresses);
    EXPECT_EQ(again.subscriptions[0].dead_letter.stream,
              config.subscriptions[0].dead_letter.stream);
    EXPECT_EQ(again.subscriptions[1].dead_letter.stream,
              config.subscriptions[1].dead_letter.stream);
    EXPECT_EQ(EmitEffectiveYaml(again), printed);
  }
}

}  // namespace
}  // namespace streamcar::config
