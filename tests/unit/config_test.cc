// Every rule of SPEC section 2, and every rejected input, one test each.

#include <gtest/gtest.h>

#include <map>

#include "sidecar/config/loader.h"

namespace streamcar::config {
namespace {

EnvLookup Env(std::map<std::string, std::string> values = {}) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

const char* kMinimal = R"(version: 1
subscriptions:
  - stream: orders
    group: billing
    start: new
    handler:
      url: http://127.0.0.1:8080/orders
)";

Config Load(const std::string& yaml, const EnvLookup& env = Env()) {
  auto config = LoadConfigText(yaml, "test.yaml", env);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? *config : Config{};
}

std::string ErrorOf(const std::string& yaml, const EnvLookup& env = Env()) {
  auto config = LoadConfigText(yaml, "test.yaml", env);
  EXPECT_FALSE(config.ok()) << "accepted:\n" << yaml;
  return config.ok() ? "" : config.status().message();
}

// The minimal file with `extra` appended under the first subscription (indented 4 spaces); when
// `extra` brings its own handler, the minimal one is left out.
std::string WithSub(const std::string& extra) {
  if (extra.find("handler:") == std::string::npos) return std::string(kMinimal) + extra;
  std::string base = kMinimal;
  base.erase(base.find("    handler:"));
  return base + extra;
}

TEST(Config, MinimalFileGetsEveryDefault) {
  Config c = Load(kMinimal);
  ASSERT_EQ(c.subscriptions.size(), 1u);
  const auto& s = c.subscriptions[0];
  EXPECT_EQ(c.redis.url, "redis://127.0.0.1:6379/0");
  EXPECT_EQ(c.redis.connect_timeout, Millis(2000));
  EXPECT_EQ(c.redis.command_timeout, Millis(5000));
  EXPECT_EQ(c.admin.listen, "0.0.0.0:9464");
  EXPECT_EQ(c.shutdown.drain_timeout, Millis(25000));
  EXPECT_FALSE(c.consumer_name.empty());  // the host name
  EXPECT_EQ(s.name, "orders/billing");
  EXPECT_EQ(s.handler.timeout, Millis(10000));
  EXPECT_EQ(s.handler.concurrency, 16);
  EXPECT_EQ(s.handler.batch_size, 1);
  EXPECT_EQ(s.handler.format, Format::kJson);
  EXPECT_EQ(s.handler.raw_field, "data");
  EXPECT_EQ(s.handler.reject_statuses, (std::vector<int>{400, 413, 415, 422}));
  EXPECT_EQ(s.retry.max_attempts, 5);
  EXPECT_EQ(s.retry.initial_backoff, Millis(1000));
  EXPECT_EQ(s.retry.max_backoff, Millis(60000));
  EXPECT_DOUBLE_EQ(s.retry.multiplier, 2.0);
  EXPECT_DOUBLE_EQ(s.retry.jitter, 0.2);
  EXPECT_EQ(s.dead_letter.stream, "orders:dlq");
  EXPECT_EQ(s.claim.min_idle, Millis(60000));
  EXPECT_EQ(s.claim.interval, Millis(10000));
  EXPECT_EQ(s.claim.count, 100);
  EXPECT_FALSE(s.ack.delete_entries);
  EXPECT_FALSE(s.retention.enabled());
  EXPECT_EQ(s.retention.interval, Millis(60000));
}

TEST(Config, StartMapsToGroupCreateIds) {
  EXPECT_EQ(Load(kMinimal).subscriptions[0].StartId(), "$");
  std::string yaml = kMinimal;
  EXPECT_EQ(Load(yaml.replace(yaml.find("start: new"), 10, "start: beginning"))
                .subscriptions[0]
                .StartId(),
            "0");
  yaml = kMinimal;
  EXPECT_EQ(Load(yaml.replace(yaml.find("start: new"), 10, "start: 1700000000000-5"))
                .subscriptions[0]
                .StartId(),
            "1700000000000-5");
}

TEST(Config, ExpandsVariablesInEveryScalar) {
  Config c = Load(R"(version: 1
redis:
  url: redis://${REDIS_HOST}:6379/0
  password: "${REDIS_PASSWORD}"
consumer:
  name: ${POD_NAME:-fallback}
subscriptions:
  - stream: ${STREAM}
    group: g
    start: new
    handler: { url: "http://127.0.0.1:${PORT:-8080}/", concurrency: "${CONC}" }
)",
                  Env({{"REDIS_HOST", "redis"},
                       {"REDIS_PASSWORD", "s3cr:t#x"},
                       {"STREAM", "orders"},
                       {"CONC", "4"}}));
  EXPECT_EQ(c.redis.url, "redis://redis:6379/0");
  EXPECT_EQ(c.redis.password, "s3cr:t#x");  // YAML-special characters stay data
  EXPECT_EQ(c.consumer_name, "fallback");
  EXPECT_EQ(c.subscriptions[0].stream, "orders");
  EXPECT_EQ(c.subscriptions[0].handler.url, "http://127.0.0.1:8080/");
  EXPECT_EQ(c.subscriptions[0].handler.concurrency, 4);
}

TEST(Config, UnsetVariableIsAnErrorNamingIt) {
  std::string error = ErrorOf(R"(version: 1
redis:
  password: ${REDIS_PASSWORD}
subscriptions: [{stream: s, group: g, start: new, handler: {url: "http://h/"}}]
)");
  EXPECT_NE(error.find("REDIS_PASSWORD"), std::string::npos) << error;
  EXPECT_NE(error.find("test.yaml:3"), std::string::npos) << error;
  EXPECT_NE(error.find("redis.password"), std::string::npos) << error;
}

TEST(Config, ParsesDurations) {
  Config c = Load(WithSub("    handler: { url: \"http://h/\", timeout: 1m30s }\n"));
  EXPECT_EQ(c.subscriptions[0].handler.timeout, Millis(90000));
}

TEST(Config, RejectsBareNumberDuration) {
  std::string error = ErrorOf(WithSub("    claim: { min_idle: 60 }\n"));
  EXPECT_NE(error.find("subscriptions[0].claim.min_idle"), std::string::npos) << error;
  EXPECT_NE(error.find("no unit"), std::string::npos) << error;
}

TEST(Config, RejectsNegativeDuration) {
  std::string error = ErrorOf(WithSub("    retry: { initial_backoff: -1s }\n"));
  EXPECT_NE(error.find("subscriptions[0].retry.initial_backoff"), std::string::npos) << error;
}

TEST(Config, RejectsUnknownDurationUnit) {
  std::string error =
      ErrorOf("version: 1\nshutdown:\n  drain_timeout: 3d\n" + std::string(kMinimal).substr(11));
  EXPECT_NE(error.find("shutdown.drain_timeout"), std::string::npos) << error;
  EXPECT_NE(error.find("unknown unit"), std::string::npos) << error;
}

TEST(Config, UnknownKeySuggestsTheKeyMeant) {
  std::string error = ErrorOf(WithSub("    retry:\n      max_attemps: 3\n"));
  EXPECT_NE(
      error.find("subscriptions[0].retry.max_attemps: unknown key (did you mean max_attempts?)"),
      std::string::npos)
      << error;
  EXPECT_NE(error.find("test.yaml:9:"), std::string::npos) << error;
}

TEST(Config, UnknownTopLevelKeyWithoutCloseMatch) {
  std::string error = ErrorOf(std::string(kMinimal) + "zzzzzz: 1\n");
  EXPECT_NE(error.find("zzzzzz: unknown key"), std::string::npos) << error;
  EXPECT_EQ(error.find("did you mean"), std::string::npos) << error;
}

TEST(Config, UnknownKeysEverywhereAreCaught) {
  EXPECT_NE(ErrorOf("version: 1\nredis: { urll: x }\n")
                .find("redis.urll: unknown key (did you mean url?)"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(WithSub("    handler: { url: \"http://h/\", concurency: 2 }\n"))
          .find("subscriptions[0].handler.concurency: unknown key (did you mean concurrency?)"),
      std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nadmin: { lisen: x }\n").find("admin.lisen"), std::string::npos);
}

TEST(Config, MissingStartIsAnError) {
  std::string error = ErrorOf(R"(version: 1
subscriptions:
  - stream: orders
    group: billing
    handler: { url: "http://h/" }
)");
  EXPECT_NE(error.find("subscriptions[0].start: required"), std::string::npos) << error;
}

TEST(Config, RejectsInvalidStart) {
  std::string yaml = kMinimal;
  std::string error = ErrorOf(yaml.replace(yaml.find("start: new"), 10, "start: latest"));
  EXPECT_NE(error.find("subscriptions[0].start"), std::string::npos) << error;
}

TEST(Config, MissingStreamOrGroupIsAnError) {
  EXPECT_NE(
      ErrorOf(
          "version: 1\nsubscriptions: [{group: g, start: new, handler: {url: \"http://h/\"}}]\n")
          .find("subscriptions[0].stream: required"),
      std::string::npos);
  EXPECT_NE(
      ErrorOf(
          "version: 1\nsubscriptions: [{stream: s, start: new, handler: {url: \"http://h/\"}}]\n")
          .find("subscriptions[0].group: required"),
      std::string::npos);
}

TEST(Config, DuplicateStreamAndGroupIsAnError) {
  std::string error = ErrorOf(std::string(kMinimal) + R"(  - stream: orders
    group: billing
    start: beginning
    name: other
    handler: { url: "http://h/" }
)");
  EXPECT_NE(error.find("subscriptions[1]"), std::string::npos) << error;
  EXPECT_NE(error.find("already subscribed"), std::string::npos) << error;
}

TEST(Config, SameStreamDifferentGroupsIsFine) {
  Config c = Load(std::string(kMinimal) + R"(  - stream: orders
    group: shipping
    start: new
    handler: { url: "http://h/" }
)");
  EXPECT_EQ(c.subscriptions.size(), 2u);
}

TEST(Config, DefaultsMergeIntoEachSubscription) {
  Config c = Load(R"(version: 1
defaults:
  handler: { url: "http://127.0.0.1:8080/", timeout: 3s, headers: { X-Team: a, X-Env: prod } }
  retry: { max_attempts: 9 }
subscriptions:
  - stream: a
    group: g
    start: new
    handler: { timeout: 5s, headers: { X-Team: b } }
  - stream: b
    group: g
    start: new
    retry: { max_attempts: 2 }
)");
  const auto& a = c.subscriptions[0];
  const auto& b = c.subscriptions[1];
  EXPECT_EQ(a.handler.url, "http://127.0.0.1:8080/");
  EXPECT_EQ(a.handler.timeout, Millis(5000));
  EXPECT_EQ(a.handler.headers.at("X-Team"), "b");
  EXPECT_EQ(a.handler.headers.at("X-Env"), "prod");
  EXPECT_EQ(a.retry.max_attempts, 9);
  EXPECT_EQ(b.handler.timeout, Millis(3000));
  EXPECT_EQ(b.retry.max_attempts, 2);
  EXPECT_EQ(b.dead_letter.stream, "b:dlq");
}

TEST(Config, DefaultsMayNotSetIdentityKeys) {
  std::string error =
      ErrorOf("version: 1\ndefaults:\n  stream: x\n" + std::string(kMinimal).substr(11));
  EXPECT_NE(error.find("defaults.stream: not allowed in defaults"), std::string::npos) << error;
}

TEST(Config, HandlerUrlRequiredHereOrInDefaults) {
  std::string error = ErrorOf("version: 1\nsubscriptions: [{stream: s, group: g, start: new}]\n");
  EXPECT_NE(error.find("subscriptions[0].handler.url: required"), std::string::npos) << error;
}

TEST(Config, RejectsBadUrlSchemes) {
  EXPECT_NE(
      ErrorOf(WithSub("    handler: { url: \"ftp://h/\" }\n")).find("subscriptions[0].handler.url"),
      std::string::npos);
  EXPECT_NE(ErrorOf(WithSub("    handler: { url: \"http://h/\", health_url: \"h:1/health\" }\n"))
                .find("handler.health_url"),
            std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nredis: { url: \"http://r:6379\" }\n").find("redis.url"),
            std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nredis: { url: \"redis://r:99999\" }\n").find("invalid port"),
            std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nredis: { url: \"unix://relative.sock\" }\n").find("absolute"),
            std::string::npos);
}

TEST(Config, AcceptsEveryRedisUrlForm) {
  for (const char* url : {"redis://r:6380/2", "rediss://r/0", "unix:///var/run/redis.sock",
                          "redis://user:pw@r:6379/0", "redis://[::1]:6379"}) {
    std::string yaml = std::string("version: 1\nredis: { url: \"") + url + "\" }\n" +
                       std::string(kMinimal).substr(11);
    EXPECT_EQ(Load(yaml).redis.url, url);
  }
}

TEST(Config, RangesAreChecked) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"    handler: { url: \"http://h/\", concurrency: 0 }\n", "handler.concurrency"},
      {"    handler: { url: \"http://h/\", concurrency: 1025 }\n", "handler.concurrency"},
      {"    handler: { url: \"http://h/\", batch_size: 1001 }\n", "handler.batch_size"},
      {"    handler: { url: \"http://h/\", timeout: 0s }\n", "handler.timeout"},
      {"    retry: { max_attempts: -1 }\n", "retry.max_attempts"},
      {"    retry: { multiplier: 0.5 }\n", "retry.multiplier"},
      {"    retry: { jitter: 1.0 }\n", "retry.jitter"},
      {"    retry: { jitter: -0.1 }\n", "retry.jitter"},
      {"    retry: { initial_backoff: 10s, max_backoff: 1s }\n", "retry.max_backoff"},
      {"    claim: { count: 0 }\n", "claim.count"},
      {"    claim: { min_idle: 10ms }\n", "claim.min_idle"},
      {"    claim: { interval: 0s }\n", "claim.interval"},
      {"    dead_letter: { max_len: -5 }\n", "dead_letter.max_len"},
      {"    retention: { max_len: -1 }\n", "retention.max_len"},
      {"    retention: { interval: 0s }\n", "retention.interval"},
      {"    handler: { url: \"http://h/\", reject_statuses: [200] }\n",
       "handler.reject_statuses[0]"},
      {"    handler: { url: \"http://h/\", reject_statuses: [400, 700] }\n",
       "handler.reject_statuses[1]"},
  };
  for (const auto& [extra, key] : cases) {
    std::string error = ErrorOf(WithSub(extra));
    EXPECT_NE(error.find("subscriptions[0]." + key), std::string::npos) << extra << " -> " << error;
  }
}

TEST(Config, RejectsWrongValueTypes) {
  EXPECT_NE(ErrorOf(WithSub("    handler: { url: \"http://h/\", concurrency: many }\n"))
                .find("whole number"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithSub("    ack: { delete: maybe }\n")).find("true or false"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(WithSub("    retry: [1, 2]\n")).find("subscriptions[0].retry: must be a mapping"),
      std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nsubscriptions: {stream: s}\n").find("must be a list"),
            std::string::npos);
}

TEST(Config, FormatIsValidatedWithASuggestion) {
  std::string error = ErrorOf(WithSub("    handler: { url: \"http://h/\", format: jsn }\n"));
  EXPECT_NE(error.find("subscriptions[0].handler.format"), std::string::npos) << error;
  EXPECT_NE(error.find("did you mean json?"), std::string::npos) << error;
}

TEST(Config, BatchNeedsJson) {
  std::string error =
      ErrorOf(WithSub("    handler: { url: \"http://h/\", batch_size: 10, format: raw }\n"));
  EXPECT_NE(error.find("subscriptions[0].handler.batch_size"), std::string::npos) << error;
}

TEST(Config, ReservedHeadersCannotBeOverridden) {
  std::string error =
      ErrorOf(WithSub("    handler: { url: \"http://h/\", headers: { Idempotency-Key: x } }\n"));
  EXPECT_NE(error.find("handler.headers.Idempotency-Key"), std::string::npos) << error;
  EXPECT_NE(
      ErrorOf(WithSub("    handler: { url: \"http://h/\", headers: { \"bad header\": x } }\n"))
          .find("not a valid HTTP header name"),
      std::string::npos);
}

TEST(Config, VersionMustBeOne) {
  EXPECT_NE(ErrorOf("version: 2\n" + std::string(kMinimal).substr(11)).find("version"),
            std::string::npos);
}

TEST(Config, AdminListenIsValidated) {
  EXPECT_EQ(
      Load("version: 1\nadmin: { listen: \"\" }\n" + std::string(kMinimal).substr(11)).admin.listen,
      "");
  EXPECT_EQ(
      Load("version: 1\nadmin: { listen: \"[::]:9464\" }\n" + std::string(kMinimal).substr(11))
          .admin.listen,
      "[::]:9464");
  EXPECT_NE(ErrorOf("version: 1\nadmin: { listen: \"9464\" }\n" + std::string(kMinimal).substr(11))
                .find("admin.listen"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf("version: 1\nadmin: { listen: \"0.0.0.0:0\" }\n" + std::string(kMinimal).substr(11))
          .find("admin.listen"),
      std::string::npos);
}

TEST(Config, TlsCertAndKeyGoTogether) {
  std::string error =
      ErrorOf("version: 1\nredis: { url: \"rediss://r/0\", tls: { cert_file: /c.pem } }\n" +
              std::string(kMinimal).substr(11));
  EXPECT_NE(error.find("redis.tls.key_file"), std::string::npos) << error;
}

TEST(Config, NoSubscriptionsIsAnError) {
  EXPECT_NE(ErrorOf("version: 1\nsubscriptions: []\n").find("at least one subscription"),
            std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\n").find("subscriptions: required"), std::string::npos);
}

TEST(Config, InvalidYamlReportsTheLine) {
  std::string error = ErrorOf("version: 1\nsubscriptions:\n  - stream: [unclosed\n");
  EXPECT_NE(error.find("test.yaml:"), std::string::npos) << error;
  EXPECT_NE(error.find("invalid YAML"), std::string::npos) << error;
}

TEST(Config, DuplicateKeysAreAnError) {
  std::string error =
      ErrorOf(WithSub("    retry: { max_attempts: 1 }\n    retry: { max_attempts: 2 }\n"));
  EXPECT_NE(error.find("subscriptions[0].retry: duplicate key"), std::string::npos) << error;
  EXPECT_NE(error.find("test.yaml:9"), std::string::npos) << error;
}

TEST(Config, ErrorsAreOneLineEvenWithControlCharacters) {
  // Found by the config fuzzer (its input, verbatim): yaml-cpp's message quoted a raw newline.
  const std::string yaml(
      "\x76\x65\x72\x73\x69\x6f\x6e\x3a\x20\x31\x0a\x73\x75\x62\x73\x63\x72\x69\x70\x74\x69\x6f\x6e"
      "\x73\x3a\x0a\x20\x20\x2d\x20\x73\x74\x72\x65\x61\x6d\x3a\x20\x6f\x72\x64\x65\x72\x73\x0a\x20"
      "\x20\x20\x20\x67\x72\x6f\x75\x70\x3a\x20\x62\x69\x6c\x6c\x69\x84\x00\x0a\x20\x20\x20\x20\x73"
      "\x74\x61\x72\x79\x3a\x20\x7b\x20\x6d\x61\x78\x5f\x61\x74\x74\x65\x6d\x70\x74\x73\x3a\x20\x33"
      "\x2c\x20\x69\x6e\x69\x74\x69\x61\x6c\x5f\x62\x61\x63\x6b\x6f\x66\x66\x3a\x20\x31\x6d\x33\x30"
      "\x73\x2c\x20\x6a\x69\x74\x74\x65\x72\x3a\x20\x30\x2e\x35\x20\x7d\x0a",
      132);
  std::string error = ErrorOf(yaml);
  EXPECT_NE(error.find("invalid YAML"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  std::string bad_value = ErrorOf(WithSub("    handler: { url: \"ftp://x\\ty\" }\n"));
  EXPECT_EQ(bad_value.find('\t'), std::string::npos) << bad_value;
}

TEST(Config, EmptyFileIsAnError) { EXPECT_NE(ErrorOf("").find("empty"), std::string::npos); }

TEST(Config, MissingFileIsAnErrorNamingIt) {
  auto config = LoadConfigFile("/nonexistent/streamcar.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("/nonexistent/streamcar.yaml"), std::string::npos);
}

TEST(Config, DeadLetterStreamMustDifferFromSource) {
  EXPECT_NE(ErrorOf(WithSub("    dead_letter: { stream: orders }\n")).find("dead_letter.stream"),
            std::string::npos);
}

TEST(Config, EffectiveYamlMasksPasswordsAndRoundTrips) {
  Config c = Load(R"(version: 1
redis: { url: "redis://app:urlsecret@r:6379/0", password: hunter2 }
subscriptions:
  - stream: orders
    group: billing
    start: new
    handler: { url: "http://h/", headers: { X-A: "1" } }
    retry: { jitter: 0.1 }
)");
  std::string yaml = EmitEffectiveYaml(c);
  EXPECT_EQ(yaml.find("hunter2"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("urlsecret"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("password: \"***\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("jitter: 0.1"), std::string::npos) << yaml;
  // What check prints is itself a valid configuration with the same meaning.
  Config again = Load(yaml);
  EXPECT_EQ(again.subscriptions[0].handler.headers, c.subscriptions[0].handler.headers);
  EXPECT_EQ(again.subscriptions[0].retry.max_backoff, c.subscriptions[0].retry.max_backoff);
  EXPECT_EQ(again.consumer_name, c.consumer_name);
}

TEST(Config, MaxHeldBytesDefaultsTo32MiB) {
  EXPECT_EQ(Load(kMinimal).subscriptions[0].handler.max_held_bytes, uint64_t{32} << 20);
}

TEST(Config, MaxHeldBytesTakesEachSizeUnit) {
  auto held = [](const std::string& size) -> uint64_t {
    Config c = Load(WithSub("    handler: { url: \"http://h/\", max_held_bytes: " + size + " }\n"));
    return c.subscriptions.empty() ? 0 : c.subscriptions[0].handler.max_held_bytes;
  };
  EXPECT_EQ(held("512B"), 512u);
  EXPECT_EQ(held("64KiB"), uint64_t{64} << 10);
  EXPECT_EQ(held("8MiB"), uint64_t{8} << 20);
  EXPECT_EQ(held("2GiB"), uint64_t{2} << 30);
}

TEST(Config, MaxHeldBytesInDefaultsApplies) {
  Config c = Load(R"(version: 1
defaults:
  handler: { url: "http://h/", max_held_bytes: 4MiB }
subscriptions:
  - { stream: a, group: g, start: new }
)");
  ASSERT_EQ(c.subscriptions.size(), 1u);
  EXPECT_EQ(c.subscriptions[0].handler.max_held_bytes, uint64_t{4} << 20);
}

TEST(Config, MaxHeldBytesRejectsBareNegativeZeroAndUnknownUnits) {
  auto error = [](const std::string& size) {
    return ErrorOf(
        WithSub("    handler: { url: \"http://h/\", max_held_bytes: \"" + size + "\" }\n"));
  };
  for (const char* bad : {"1048576", "-1MiB", "0MiB", "1MB", "1mib", "1.5MiB", "MiB", ""}) {
    const std::string message = error(bad);
    EXPECT_NE(message.find("subscriptions[0].handler.max_held_bytes"), std::string::npos)
        << bad << ": " << message;
    EXPECT_NE(message.find("test.yaml:"), std::string::npos) << message;
  }
  EXPECT_NE(error("1048576").find("no unit"), std::string::npos);
  EXPECT_NE(error("-1MiB").find("negative"), std::string::npos);
  EXPECT_NE(error("1MB").find("unknown unit \"MB\""), std::string::npos);
}

TEST(Config, EffectiveYamlPrintsMaxHeldBytesCanonically) {
  Config c = Load(WithSub("    handler: { url: \"http://h/\", max_held_bytes: 2048KiB }\n"));
  ASSERT_EQ(c.subscriptions.size(), 1u);
  std::string yaml = EmitEffectiveYaml(c);
  EXPECT_NE(yaml.find("max_held_bytes: 2MiB"), std::string::npos) << yaml;
  EXPECT_NE(EmitEffectiveYaml(Load(kMinimal)).find("max_held_bytes: 32MiB"), std::string::npos);
  Config again = Load(yaml);
  ASSERT_EQ(again.subscriptions.size(), 1u);
  EXPECT_EQ(again.subscriptions[0].handler.max_held_bytes, uint64_t{2} << 20);
}

TEST(Config, EffectiveYamlMasksSensitiveHeaderValues) {
  Config c = Load(WithSub(R"(    handler:
      url: http://h/
      headers:
        Authorization: "Bearer tok-authz"
        Proxy-Authorization: "Basic tok-proxy"
        Cookie: "sid=tok-cookie"
        X-Api-Key: tok-apikey
        X-Auth-Token: tok-auth
        X-Client-Secret: tok-secret
        X-DB-Password: tok-password
        X-Tenant: acme
)"));
  const std::string yaml = EmitEffectiveYaml(c);
  EXPECT_EQ(yaml.find("tok-"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("Authorization: \"***\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("X-Api-Key: \"***\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("X-Tenant: acme"), std::string::npos) << yaml;  // harmless: shown
  // The loaded configuration keeps the real values: only the printout is masked.
  EXPECT_EQ(c.subscriptions[0].handler.headers.at("Authorization"), "Bearer tok-authz");
}

TEST(Config, SensitiveHeaderRule) {
  for (const char* name :
       {"Authorization", "proxy-authorization", "COOKIE", "X-Api-Key", "X-Auth-Token",
        "X-Session-Id", "X-Hub-Signature", "X-Credentials", "X-Passwd", "Client-Secret"}) {
    EXPECT_TRUE(IsSensitiveHeader(name)) << name;
  }
  for (const char* name : {"X-Tenant", "Accept", "User-Agent", "X-Request-Source"}) {
    EXPECT_FALSE(IsSensitiveHeader(name)) << name;
  }
}

// SPEC section 2's example, exactly as written there: it must load, and give the values it shows.
const char* kSpecExample = R"spec(version: 1
redis:
  url: redis://127.0.0.1:6379/0     # redis://, rediss:// (TLS) or unix:///path/to/socket
  username: ""                       # Redis ACL user (optional)
  password: ""                       # usually "${REDIS_PASSWORD}"; never printed by `check` or logs
  connect_timeout: 2s
  command_timeout: 5s                # for every non-blocking command
  tls:                               # used with rediss:// only
    ca_file: ""                      # empty: system trust store
    cert_file: ""                    # client certificate (mutual TLS), optional
    key_file: ""
    server_name: ""                  # SNI / verification name; default: host of the url
    verify: true
consumer:
  name: ${POD_NAME:-}                # empty: the host name
admin:
  listen: 0.0.0.0:9464               # /metrics /healthz /readyz; "" turns the server off
shutdown:
  drain_timeout: 25s                 # keep below the pod's terminationGracePeriodSeconds
defaults:                            # any subscription key below except stream/group/start/name
  handler: { url: http://127.0.0.1:8080/ }
subscriptions:
  - stream: orders                   # required
    group: billing                   # required
    start: new                       # required: new | beginning | <entry id>; where a NEW group starts
    name: orders-billing             # optional; label in logs and metrics; default "<stream>/<group>"
    handler:
      url: http://127.0.0.1:8080/orders   # required here or in defaults
      timeout: 10s                   # one request
      concurrency: 16                # max requests in flight for this subscription (1..1024)
      batch_size: 1                  # >1 turns on batch delivery (1..1000), section 3.4
      max_held_bytes: 32MiB          # payload bytes held in memory at once (4.2); sizes: B, KiB, MiB, GiB
      format: json                   # json | raw | cloudevents
      raw_field: data                # raw/cloudevents: the field whose bytes are the body
      headers: {}                    # static extra request headers
      health_url: ""                 # optional: while it does not answer 2xx, consumption pauses
      reject_statuses: [400, 413, 415, 422]   # dead-letter at once, no retry
    retry:
      max_attempts: 5                # deliveries before dead-letter; 0 means retry forever
      initial_backoff: 1s
      max_backoff: 60s
      multiplier: 2.0
      jitter: 0.2                    # +/- fraction applied to each backoff
    dead_letter:
      stream: orders:dlq             # default "<stream>:dlq"
      max_len: 0                     # >0: approximate cap on the DLQ length
    claim:
      min_idle: 60s                  # XAUTOCLAIM threshold for entries of other (dead) consumers
      interval: 10s                  # the reclaim beat
      count: 100
    ordering:
      key_field: ""                  # set: entries with equal values of this field are delivered one at a time, in id order
    ack:
      delete: false                  # true: delete the entry once acknowledged, section 4.3
    retention:                       # optional; its own beat, runs even when nothing is consumed
      max_len: 0                     # keep about this many newest entries (XTRIM MAXLEN ~)
      max_age: 0s                    # drop entries older than this (XTRIM MINID ~ now-max_age)
      interval: 60s
)spec";

TEST(Config, SpecSection2ExampleLoadsWithItsDocumentedValues) {
  Config c = Load(kSpecExample, Env({{"POD_NAME", "pod-7"}}));
  ASSERT_EQ(c.subscriptions.size(), 1u);
  EXPECT_EQ(c.redis.url, "redis://127.0.0.1:6379/0");
  EXPECT_EQ(c.redis.username, "");
  EXPECT_EQ(c.redis.password, "");
  EXPECT_EQ(c.redis.connect_timeout, Millis(2000));
  EXPECT_EQ(c.redis.command_timeout, Millis(5000));
  EXPECT_TRUE(c.redis.tls.verify);
  EXPECT_EQ(c.consumer_name, "pod-7");
  EXPECT_EQ(c.admin.listen, "0.0.0.0:9464");
  EXPECT_EQ(c.shutdown.drain_timeout, Millis(25000));
  const auto& s = c.subscriptions[0];
  EXPECT_EQ(s.stream, "orders");
  EXPECT_EQ(s.group, "billing");
  EXPECT_EQ(s.StartId(), "$");
  EXPECT_EQ(s.name, "orders-billing");
  EXPECT_EQ(s.handler.url, "http://127.0.0.1:8080/orders");
  EXPECT_EQ(s.handler.timeout, Millis(10000));
  EXPECT_EQ(s.handler.concurrency, 16);
  EXPECT_EQ(s.handler.batch_size, 1);
  EXPECT_EQ(s.handler.max_held_bytes, uint64_t{32} << 20);
  EXPECT_EQ(s.handler.format, Format::kJson);
  EXPECT_EQ(s.handler.raw_field, "data");
  EXPECT_TRUE(s.handler.headers.empty());
  EXPECT_EQ(s.handler.health_url, "");
  EXPECT_EQ(s.handler.reject_statuses, (std::vector<int>{400, 413, 415, 422}));
  EXPECT_EQ(s.retry.max_attempts, 5);
  EXPECT_EQ(s.retry.initial_backoff, Millis(1000));
  EXPECT_EQ(s.retry.max_backoff, Millis(60000));
  EXPECT_DOUBLE_EQ(s.retry.multiplier, 2.0);
  EXPECT_DOUBLE_EQ(s.retry.jitter, 0.2);
  EXPECT_EQ(s.dead_letter.stream, "orders:dlq");
  EXPECT_EQ(s.dead_letter.max_len, 0);
  EXPECT_EQ(s.claim.min_idle, Millis(60000));
  EXPECT_EQ(s.claim.interval, Millis(10000));
  EXPECT_EQ(s.claim.count, 100);
  EXPECT_EQ(s.ordering.key_field, "");
  EXPECT_FALSE(s.ack.delete_entries);
  EXPECT_EQ(s.retention.max_len, 0);
  EXPECT_EQ(s.retention.max_age, Millis(0));
  EXPECT_EQ(s.retention.interval, Millis(60000));
  // Every value the example writes out is the default: the example and a minimal file agree.
  Config minimal = Load(kMinimal);
  EXPECT_EQ(minimal.subscriptions[0].handler.max_held_bytes, s.handler.max_held_bytes);
  EXPECT_EQ(minimal.subscriptions[0].claim.min_idle, s.claim.min_idle);
}

// SPEC section 10: `api`, `streams` and `archive`.

const char* kStreamsOnly = R"(version: 1
streams:
  - name: feed
)";

TEST(LogApiConfig, StreamsWithoutSubscriptionsGetEveryDefault) {
  Config c = Load(kStreamsOnly);
  EXPECT_TRUE(c.subscriptions.empty());
  ASSERT_EQ(c.streams.size(), 1u);
  const auto& s = c.streams[0];
  EXPECT_EQ(s.name, "feed");
  EXPECT_TRUE(s.produce);
  EXPECT_EQ(s.max_len, 0);
  EXPECT_FALSE(s.notify);
  EXPECT_FALSE(s.retention.enabled());
  EXPECT_EQ(s.retention.interval, Millis(60000));
  EXPECT_FALSE(s.archive);
  EXPECT_EQ(c.api.listen, "");
  EXPECT_EQ(c.api.token_file, "");
  EXPECT_EQ(c.api.max_body, uint64_t{1} << 20);
  EXPECT_EQ(c.api.idempotency_ttl, Millis(24LL * 3600 * 1000));
  EXPECT_EQ(c.api.max_future_skew, Millis(60000));
  EXPECT_TRUE(c.api.allowed_origins.empty());
  EXPECT_EQ(c.api.max_follow_buffer, uint64_t{8} << 20);
  EXPECT_EQ(c.archive.url, "");
  EXPECT_EQ(c.archive.interval, Millis(30000));
  EXPECT_EQ(c.archive.batch, 1000);
}

TEST(LogApiConfig, NeitherSubscriptionsNorStreamsIsAnError) {
  EXPECT_NE(ErrorOf("version: 1\n").find("subscriptions: required"), std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nstreams: []\n").find("subscriptions"), std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\nsubscriptions: []\nstreams: []\n").find("at least one"),
            std::string::npos);
}

TEST(LogApiConfig, ReadsEveryKey) {
  Config c = Load(R"(version: 1
api:
  listen: 127.0.0.1:9465
  token_file: /run/secrets/${TOKEN_NAME}
  max_body: 64KiB
  idempotency_ttl: 1h30m
  max_future_skew: 5s
  allowed_origins: ["https://app.example.com", "http://localhost:3000"]
  max_follow_buffer: 16MiB
streams:
  - name: feed
    produce: false
    notify: true
    retention: { max_len: 100, max_age: 2h, interval: 5s }
    archive: true
  - name: audit
    max_len: 5000
archive:
  url: sqlite:///var/lib/streamcar/archive.db
  interval: 10s
  batch: 250
)",
                  Env({{"TOKEN_NAME", "api-token"}}));
  EXPECT_EQ(c.api.listen, "127.0.0.1:9465");
  EXPECT_EQ(c.api.token_file, "/run/secrets/api-token");
  EXPECT_EQ(c.api.max_body, uint64_t{64} << 10);
  EXPECT_EQ(c.api.idempotency_ttl, Millis(90 * 60 * 1000));
  EXPECT_EQ(c.api.max_future_skew, Millis(5000));
  EXPECT_EQ(c.api.allowed_origins,
            (std::vector<std::string>{"https://app.example.com", "http://localhost:3000"}));
  EXPECT_EQ(c.api.max_follow_buffer, uint64_t{16} << 20);
  ASSERT_EQ(c.streams.size(), 2u);
  const auto& s = c.streams[0];
  EXPECT_EQ(s.name, "feed");
  EXPECT_FALSE(s.produce);
  EXPECT_EQ(s.max_len, 0);  // an archived stream has no max_len (validation refuses it)
  EXPECT_TRUE(s.notify);
  EXPECT_EQ(s.retention.max_len, 100);
  EXPECT_EQ(s.retention.max_age, Millis(2 * 3600 * 1000));
  EXPECT_EQ(s.retention.interval, Millis(5000));
  EXPECT_TRUE(s.archive);
  EXPECT_EQ(c.streams[1].name, "audit");
  EXPECT_TRUE(c.streams[1].produce);
  EXPECT_EQ(c.streams[1].max_len, 5000);
  EXPECT_EQ(c.archive.url, "sqlite:///var/lib/streamcar/archive.db");
  EXPECT_EQ(c.archive.interval, Millis(10000));
  EXPECT_EQ(c.archive.batch, 250);
}

TEST(LogApiConfig, StreamsAndSubscriptionsTogether) {
  Config c = Load(std::string(kMinimal) + "streams: [{ name: feed }]\n");
  EXPECT_EQ(c.subscriptions.size(), 1u);
  EXPECT_EQ(c.streams.size(), 1u);
}

// Each rejected input names the file, the line and the key's full path.
void ExpectError(const std::string& yaml, const std::string& path, const std::string& what,
                 int line) {
  const std::string error = ErrorOf(yaml);
  EXPECT_NE(error.find("test.yaml:" + std::to_string(line) + ": " + path + ": "), std::string::npos)
      << error;
  EXPECT_NE(error.find(what), std::string::npos) << error;
}

TEST(LogApiConfig, UnknownKeysSayWhatWasMeant) {
  ExpectError("version: 1\napi: { listn: \"127.0.0.1:1\" }\nstreams: [{name: a}]\n", "api.listn",
              "unknown key (did you mean listen?)", 2);
  ExpectError("version: 1\nstreams:\n  - name: a\n    max_lenn: 3\n", "streams[0].max_lenn",
              "unknown key (did you mean max_len?)", 4);
  ExpectError("version: 1\nstreams:\n  - name: a\n    retention: { max_agee: 1s }\n",
              "streams[0].retention.max_agee", "did you mean max_age?", 4);
  ExpectError("version: 1\nstreams: [{name: a}]\narchive: { batchh: 3 }\n", "archive.batchh",
              "did you mean batch?", 3);
  ExpectError("version: 1\nstreams: [{name: a}]\narchiv: {}\n", "archiv", "did you mean archive?",
              3);
}

TEST(LogApiConfig, ApiListenMustBeHostPort) {
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { listen: \"9465\" }\n", "api.listen",
              "must be host:port", 3);
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { listen: \"h:99999\" }\n", "api.listen",
              "port must be 1..65535", 3);
}

TEST(LogApiConfig, ApiListenMustDifferFromAdminListen) {
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { listen: \"0.0.0.0:9464\" }\n", "api.listen",
              "must differ from admin.listen", 3);
}

TEST(LogApiConfig, MaxBodyIsASizeAboveZero) {
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { max_body: 0B }\n", "api.max_body",
              "greater than 0B", 3);
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { max_body: 1024 }\n", "api.max_body",
              "no unit", 3);
}

TEST(LogApiConfig, AllowedOriginsIsAListOfStrings) {
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { allowed_origins: https://a.example }\n",
              "api.allowed_origins", "must be a list of origins", 3);
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { allowed_origins: [{a: 1}] }\n",
              "api.allowed_origins[0]", "", 3);
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { allowed_origins: [\"\"] }\n",
              "api.allowed_origins[0]", "not empty", 3);
  EXPECT_TRUE(Load("version: 1\nstreams: [{name: a}]\napi: { allowed_origins: ~ }\n")
                  .api.allowed_origins.empty());
}

TEST(LogApiConfig, MaxFollowBufferIsASizeOfAtLeastOneMiB) {
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { max_follow_buffer: 512KiB }\n",
              "api.max_follow_buffer", "at least 1MiB", 3);
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { max_follow_buffer: [1] }\n",
              "api.max_follow_buffer", "", 3);
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { max_follow_buffer: 1024 }\n",
              "api.max_follow_buffer", "no unit", 3);
  EXPECT_EQ(Load("version: 1\nstreams: [{name: a}]\napi: { max_follow_buffer: 1MiB }\n")
                .api.max_follow_buffer,
            uint64_t{1} << 20);
}

TEST(LogApiConfig, IdempotencyTtlIsAPositiveDuration) {
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { idempotency_ttl: 0s }\n",
              "api.idempotency_ttl", "greater than 0s", 3);
  ExpectError("version: 1\nstreams: [{name: a}]\napi: { idempotency_ttl: 60 }\n",
              "api.idempotency_ttl", "no unit", 3);
}

TEST(LogApiConfig, StreamNameIsRequiredAndUnique) {
  ExpectError("version: 1\nstreams:\n  - produce: true\n", "streams[0].name", "required", 3);
  ExpectError("version: 1\nstreams:\n  - name: \"\"\n", "streams[0].name", "must not be empty", 3);
  ExpectError("version: 1\nstreams:\n  - name: a\n  - name: b\n  - name: a\n", "streams[2].name",
              "listed by an earlier stream", 5);
}

TEST(LogApiConfig, MaxLenMustNotBeNegative) {
  ExpectError("version: 1\nstreams:\n  - name: a\n    max_len: -1\n", "streams[0].max_len",
              "must be between 0 and", 4);
  ExpectError("version: 1\nstreams:\n  - name: a\n    retention: { max_len: -5 }\n",
              "streams[0].retention.max_len", "must be between 0 and", 4);
}

TEST(LogApiConfig, BooleansAreStrict) {
  ExpectError("version: 1\nstreams:\n  - name: a\n    produce: maybe\n", "streams[0].produce",
              "must be true or false", 4);
  ExpectError("version: 1\nstreams:\n  - name: a\n    notify: 1\n", "streams[0].notify",
              "must be true or false", 4);
  ExpectError("version: 1\nstreams:\n  - name: a\n    archive: yess\n", "streams[0].archive",
              "must be true or false", 4);
}

TEST(LogApiConfig, StreamsMustBeAListOfMappings) {
  ExpectError("version: 1\nstreams: feed\n", "streams", "must be a list", 2);
  ExpectError("version: 1\nstreams: [feed]\n", "streams[0]", "must be a mapping", 2);
}

TEST(LogApiConfig, ArchiveTrueNeedsArchiveUrl) {
  ExpectError("version: 1\nstreams:\n  - name: a\n  - name: b\n    archive: true\n",
              "streams[1].archive", "needs archive.url", 4);
}

TEST(LogApiConfig, ArchiveUrlIsSqliteOrPostgres) {
  auto error = [](const std::string& url) {
    return ErrorOf("version: 1\nstreams: [{name: a}]\narchive:\n  url: \"" + url + "\"\n");
  };
  for (const char* bad : {"mysql://h/db", "/var/lib/a.db", "sqlite://relative.db", "sqlite:///",
                          "postgres://", "http://h/"}) {
    const std::string message = error(bad);
    EXPECT_NE(message.find("test.yaml:4: archive.url: "), std::string::npos)
        << bad << ": " << message;
  }
  EXPECT_NE(error("mysql://u:pw@h/db").find("must be sqlite:///path or postgres://"),
            std::string::npos);
  EXPECT_EQ(error("mysql://u:pw@h/db").find(":pw@"), std::string::npos);  // never printed
  EXPECT_EQ(Load("version: 1\nstreams: [{name: a}]\narchive: { url: \"postgres://u@h:5432/db\" "
                 "}\n")
                .archive.url,
            "postgres://u@h:5432/db");
}

TEST(LogApiConfig, ArchiveUrlAcceptsPostgresqlScheme) {
  // libpq and OpenArchive take both spellings; so does validation.
  EXPECT_EQ(Load("version: 1\nstreams: [{name: a}]\narchive: { url: \"postgresql://u@h:5432/db\" "
                 "}\n")
                .archive.url,
            "postgresql://u@h:5432/db");
  EXPECT_NE(ErrorOf("version: 1\nstreams: [{name: a}]\narchive: { url: \"postgresql://\" }\n")
                .find("archive.url: "),
            std::string::npos);
}

TEST(LogApiConfig, ArchivedStreamRefusesMaxLen) {
  const std::string error = ErrorOf(
      "version: 1\nstreams: [{name: feed, archive: true, max_len: 100}]\n"
      "archive: { url: \"sqlite:///tmp/a.db\" }\n");
  EXPECT_NE(error.find("streams[0].max_len: "), std::string::npos) << error;
  EXPECT_NE(error.find("\"feed\" has archive: true"), std::string::npos) << error;
}

TEST(LogApiConfig, AckDeleteOnArchivedStreamIsRefused) {
  const std::string yaml =
      "version: 1\nstreams: [{name: feed, archive: true}]\n"
      "archive: { url: \"sqlite:///tmp/a.db\" }\n"
      "subscriptions:\n  - name: mailer\n    stream: feed\n    group: g\n    start: new\n"
      "    handler: { url: \"http://h/\" }\n";
  const std::string error = ErrorOf(yaml + "    ack: { delete: true }\n");
  EXPECT_NE(error.find("subscriptions[0].ack.delete: "), std::string::npos) << error;
  EXPECT_NE(error.find("\"mailer\""), std::string::npos) << error;
  EXPECT_NE(error.find("\"feed\", which is archived"), std::string::npos) << error;
  EXPECT_FALSE(Load(yaml).subscriptions[0].ack.delete_entries);  // without ack.delete: fine
}

TEST(LogApiConfig, ArchiveBatchAndInterval) {
  ExpectError("version: 1\nstreams: [{name: a}]\narchive: { batch: 0 }\n", "archive.batch",
              "must be between 1 and", 3);
  ExpectError("version: 1\nstreams: [{name: a}]\narchive: { interval: 0s }\n", "archive.interval",
              "greater than 0s", 3);
}

TEST(LogApiConfig, EffectiveYamlPrintsTheNewSectionsAndRoundTrips) {
  Config c = Load(R"(version: 1
api: { listen: "127.0.0.1:9465", token_file: /run/token, max_body: 2048KiB, idempotency_ttl: 90m }
streams:
  - { name: feed, produce: false, notify: true, archive: true,
      retention: { max_len: 10, max_age: 1h, interval: 5s } }
  - { name: capped, max_len: 7 }
archive: { url: "postgres://app:pgsecret@db:5432/log", interval: 10s, batch: 50 }
)");
  const std::string yaml = EmitEffectiveYaml(c);
  EXPECT_EQ(yaml.find("pgsecret"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("token_file: /run/token"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("max_body: 2MiB"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("idempotency_ttl: 1h30m"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("subscriptions: []"), std::string::npos) << yaml;
  Config again = Load(yaml);
  EXPECT_EQ(again.api.listen, c.api.listen);
  EXPECT_EQ(again.api.token_file, c.api.token_file);
  EXPECT_EQ(again.api.max_body, c.api.max_body);
  EXPECT_EQ(again.api.idempotency_ttl, c.api.idempotency_ttl);
  ASSERT_EQ(again.streams.size(), 2u);
  EXPECT_EQ(again.streams[0].name, "feed");
  EXPECT_FALSE(again.streams[0].produce);
  EXPECT_EQ(again.streams[1].max_len, 7);
  EXPECT_TRUE(again.streams[0].notify);
  EXPECT_TRUE(again.streams[0].archive);
  EXPECT_EQ(again.streams[0].retention.max_len, 10);
  EXPECT_EQ(again.streams[0].retention.max_age, Millis(3600 * 1000));
  EXPECT_EQ(again.streams[0].retention.interval, Millis(5000));
  EXPECT_EQ(again.archive.interval, Millis(10000));
  EXPECT_EQ(again.archive.batch, 50);
}

TEST(LogApiConfig, TokenFileContentIsNeverRead) {
  // check prints the path; the loader does not even open it (it may not exist where check runs).
  Config c = Load("version: 1\nstreams: [{name: a}]\napi: { token_file: /nonexistent/token }\n");
  EXPECT_NE(EmitEffectiveYaml(c).find("token_file: /nonexistent/token"), std::string::npos);
}

// SPEC 4.7: a live holder of the consumer name makes a new process exit unless this is set.
TEST(Config, WaitForNameIsOffByDefaultPrintedAndABoolean) {
  EXPECT_FALSE(Load(kMinimal).consumer_wait_for_name);
  Config c = Load(std::string(kMinimal) + "consumer: { wait_for_name: true }\n");
  EXPECT_TRUE(c.consumer_wait_for_name);
  EXPECT_NE(EmitEffectiveYaml(c).find("  wait_for_name: true\n"), std::string::npos);
  EXPECT_TRUE(Load(EmitEffectiveYaml(c)).consumer_wait_for_name);
  EXPECT_NE(EmitEffectiveYaml(Load(kMinimal)).find("  wait_for_name: false\n"), std::string::npos);
  const std::string error = ErrorOf(std::string(kMinimal) + "consumer: { wait_for_name: maybe }\n");
  EXPECT_NE(error.find("consumer.wait_for_name"), std::string::npos) << error;
}

// SPEC 4.6: consumer reaping is off by default, and when set it is at least an hour.
TEST(Config, ReapIdleIsOffByDefaultAndAtLeastAnHourWhenSet) {
  EXPECT_EQ(Load(kMinimal).consumer_reap_idle, Millis(0));
  EXPECT_EQ(Load(std::string(kMinimal) + "consumer: { reap_idle: 1h }\n").consumer_reap_idle,
            Millis(3'600'000));
  EXPECT_EQ(Load(std::string(kMinimal) + "consumer: { reap_idle: 0s }\n").consumer_reap_idle,
            Millis(0));
  const std::string error = ErrorOf(std::string(kMinimal) + "consumer: { reap_idle: 10m }\n");
  EXPECT_NE(error.find("consumer.reap_idle: must be 0s (off) or at least 1h (got 10m)"),
            std::string::npos)
      << error;
  // A reaping sidecar refreshes its own consumer on the claim beat: beats at most half apart.
  const std::string slow =
      ErrorOf(WithSub("    claim: { interval: 31m }\n") + "consumer: { reap_idle: 1h }\n");
  EXPECT_NE(slow.find("subscriptions[0].claim.interval: must be at most half of "
                      "consumer.reap_idle (1h)"),
            std::string::npos)
      << slow;
  EXPECT_EQ(Load(WithSub("    claim: { interval: 30m }\n") + "consumer: { reap_idle: 1h }\n")
                .consumer_reap_idle,
            Millis(3'600'000));
  // `check` prints the key, and what it prints reads back the same.
  Config c = Load(std::string(kMinimal) + "consumer: { reap_idle: 24h }\n");
  EXPECT_NE(EmitEffectiveYaml(c).find("  reap_idle: 24h\n"), std::string::npos);
  EXPECT_EQ(Load(EmitEffectiveYaml(c)).consumer_reap_idle, Millis(86'400'000));
}

}  // namespace
}  // namespace streamcar::config
