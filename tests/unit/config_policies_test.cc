// The delivery policies' keys of SPEC 11 that gates enforce: circuit_breaker.{failures,open_for}
// and handler.max_rps — defaults, every rejected value naming its path, and what `check` prints.

#include <gtest/gtest.h>

#include <map>

#include "sidecar/config/loader.h"

namespace streamcar::config {
namespace {

std::optional<std::string> NoEnv(const std::string& /*name*/) { return std::nullopt; }

const char* kMinimal = R"(version: 1
subscriptions:
  - stream: orders
    group: billing
    start: new
    handler:
      url: http://127.0.0.1:8080/orders
)";

Config Load(const std::string& yaml) {
  auto config = LoadConfigText(yaml, "test.yaml", &NoEnv);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? *config : Config{};
}

std::string ErrorOf(const std::string& yaml) {
  auto config = LoadConfigText(yaml, "test.yaml", &NoEnv);
  EXPECT_FALSE(config.ok()) << "accepted:\n" << yaml;
  return config.ok() ? "" : config.status().message();
}

TEST(PolicyConfig, BothAreOffByDefault) {
  const Subscription sub = Load(kMinimal).subscriptions.at(0);
  EXPECT_EQ(sub.circuit_breaker.failures, 0);
  EXPECT_FALSE(sub.circuit_breaker.enabled());
  EXPECT_EQ(sub.circuit_breaker.open_for, Millis(30000));
  EXPECT_EQ(sub.handler.max_rps, 0);
}

TEST(PolicyConfig, ReadsTheKeysAndDefaultsApply) {
  const Config c = Load(std::string(R"(version: 1
defaults:
  circuit_breaker: { failures: 5 }
  handler: { url: "http://h/", max_rps: 2.5 }
subscriptions:
  - stream: orders
    group: billing
    start: new
    circuit_breaker: { open_for: 1m30s }
  - stream: orders
    group: audit
    start: new
    handler: { max_rps: 100 }
)"));
  EXPECT_EQ(c.subscriptions[0].circuit_breaker.failures, 5);
  EXPECT_EQ(c.subscriptions[0].circuit_breaker.open_for, Millis(90000));
  EXPECT_DOUBLE_EQ(c.subscriptions[0].handler.max_rps, 2.5);
  EXPECT_EQ(c.subscriptions[1].circuit_breaker.failures, 5);
  EXPECT_DOUBLE_EQ(c.subscriptions[1].handler.max_rps, 100);
}

TEST(PolicyConfig, EveryBadValueIsRejectedNamingItsPath) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"    circuit_breaker: { failures: -1 }\n", "circuit_breaker.failures"},
      {"    circuit_breaker: { failures: 2.5 }\n", "circuit_breaker.failures"},
      {"    circuit_breaker: { failures: many }\n", "circuit_breaker.failures"},
      {"    circuit_breaker: { failures: 1000001 }\n", "circuit_breaker.failures"},
      {"    circuit_breaker: { open_for: 0s }\n", "circuit_breaker.open_for"},
      {"    circuit_breaker: { open_for: 30 }\n", "circuit_breaker.open_for"},
      {"    circuit_breaker: { open_for: -5s }\n", "circuit_breaker.open_for"},
      {"    circuit_breaker: { open_for: 5 minutes }\n", "circuit_breaker.open_for"},
      {"    circuit_breaker: { failure: 3 }\n", "circuit_breaker.failure"},
      {"    handler: { url: \"http://h/\", max_rps: -1 }\n", "handler.max_rps"},
      {"    handler: { url: \"http://h/\", max_rps: fast }\n", "handler.max_rps"},
      {"    handler: { url: \"http://h/\", max_rps: nan }\n", "handler.max_rps"},
      {"    handler: { url: \"http://h/\", max_rps: inf }\n", "handler.max_rps"},
      {"    handler: { url: \"http://h/\", max_rps: 1e7 }\n", "handler.max_rps"},
      {"    handler: { url: \"http://h/\", max_rps: \"\" }\n", "handler.max_rps"},
  };
  for (const auto& [extra, key] : cases) {
    std::string yaml = kMinimal;
    if (extra.find("handler:") != std::string::npos) yaml.erase(yaml.find("    handler:"));
    const std::string error = ErrorOf(yaml + extra);
    EXPECT_NE(error.find("subscriptions[0]." + key), std::string::npos) << extra << " -> " << error;
  }
  // The typo gets the key meant.
  std::string typo = std::string(kMinimal) + "    circuit_breaker: { failure: 3 }\n";
  EXPECT_NE(ErrorOf(typo).find("did you mean failures?"), std::string::npos) << ErrorOf(typo);
}

TEST(PolicyConfig, CheckPrintsEveryKeyAndWhatItPrintsLoadsTheSame) {
  const Config c =
      Load(std::string(kMinimal) + "    circuit_breaker: { failures: 4, open_for: 2s }\n");
  std::string yaml = EmitEffectiveYaml(c);
  EXPECT_NE(yaml.find("circuit_breaker:"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("failures: 4"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("open_for: 2s"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("max_rps: 0"), std::string::npos) << yaml;
  const Config again = Load(yaml);
  EXPECT_EQ(again.subscriptions[0].circuit_breaker.failures, 4);
  EXPECT_EQ(again.subscriptions[0].circuit_breaker.open_for, Millis(2000));

  const Config rated = Load(std::string(R"(version: 1
subscriptions:
  - stream: orders
    group: billing
    start: new
    handler: { url: "http://h/", max_rps: 0.5 }
)"));
  const std::string printed = EmitEffectiveYaml(rated);
  EXPECT_NE(printed.find("max_rps: 0.5"), std::string::npos) << printed;
  EXPECT_DOUBLE_EQ(Load(printed).subscriptions[0].handler.max_rps, 0.5);
}

}  // namespace
}  // namespace streamcar::config
