// SPEC 2's `log.level`: the key, then $STREAMCAR_LOG_LEVEL, then "info"; an unknown value is an
// error naming where it came from; `check` prints the effective level; a change is live.

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "sidecar/common/log.h"
#include "sidecar/config/config_diff.h"
#include "sidecar/config/loader.h"

namespace streamcar::config {
namespace {

EnvLookup Env(const std::map<std::string, std::string>& values = {}) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

const char* const kMinimal = R"(version: 1
subscriptions:
  - stream: orders
    group: billing
    start: new
    handler: { url: "http://127.0.0.1:8080/orders" }
)";

std::string WithLog(const std::string& log) { return std::string(kMinimal) + log; }

StatusOr<Config> Load(const std::string& yaml, const EnvLookup& env) {
  return LoadConfigText(yaml, "test.yaml", env);
}

TEST(ConfigLogLevel, WithoutKeyOrVariableItIsInfo) {
  auto config = Load(kMinimal, Env());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->log.level, LogLevel::kInfo);
  auto empty = Load(kMinimal, Env({{"STREAMCAR_LOG_LEVEL", ""}}));
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_EQ(empty->log.level, LogLevel::kInfo);
}

TEST(ConfigLogLevel, TheVariableIsUsedWhenTheKeyIsAbsent) {
  auto config = Load(kMinimal, Env({{"STREAMCAR_LOG_LEVEL", "warn"}}));
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->log.level, LogLevel::kWarn);
}

TEST(ConfigLogLevel, TheKeyBeatsTheVariable) {
  auto config = Load(WithLog("log:\n  level: debug\n"), Env({{"STREAMCAR_LOG_LEVEL", "error"}}));
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->log.level, LogLevel::kDebug);
}

TEST(ConfigLogLevel, AnUnknownValueIsAnErrorNamingTheKey) {
  auto config = Load(WithLog("log:\n  level: verbose\n"), Env());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalid);
  EXPECT_NE(config.status().message().find(
                "log.level: unknown level \"verbose\" (use debug, info, warn or error)"),
            std::string::npos)
      << config.status().message();
  auto typo = Load(WithLog("log:\n  levle: debug\n"), Env());
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("log.levle: unknown key"), std::string::npos)
      << typo.status().message();
}

TEST(ConfigLogLevel, AnUnknownVariableIsAnErrorNamingIt) {
  auto config = Load(kMinimal, Env({{"STREAMCAR_LOG_LEVEL", "loud"}}));
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("STREAMCAR_LOG_LEVEL: unknown level \"loud\""),
            std::string::npos)
      << config.status().message();
}

TEST(ConfigLogLevel, CheckPrintsTheEffectiveLevel) {
  auto from_env = Load(kMinimal, Env({{"STREAMCAR_LOG_LEVEL", "warn"}}));
  ASSERT_TRUE(from_env.ok()) << from_env.status().message();
  EXPECT_NE(EmitEffectiveYaml(*from_env).find("log:\n  level: warn\n"), std::string::npos)
      << EmitEffectiveYaml(*from_env);
  auto from_key = Load(WithLog("log: { level: error }\n"), Env());
  ASSERT_TRUE(from_key.ok()) << from_key.status().message();
  EXPECT_NE(EmitEffectiveYaml(*from_key).find("log:\n  level: error\n"), std::string::npos)
      << EmitEffectiveYaml(*from_key);
}

TEST(ConfigLogLevel, AChangedLevelIsLiveAndTheOnlyChange) {
  auto running = Load(kMinimal, Env());
  auto next = Load(WithLog("log: { level: debug }\n"), Env());
  ASSERT_TRUE(running.ok() && next.ok());
  const auto changes = DiffConfig(*running, *next);
  ASSERT_EQ(changes.size(), 1u) << ChangedKeys(changes);
  EXPECT_EQ(changes[0].path, "log.level");
  EXPECT_TRUE(changes[0].live);
  EXPECT_EQ(RefusedKeys(changes), "");
  // The level spelled out as the one in force is no change.
  EXPECT_TRUE(DiffConfig(*running, *Load(WithLog("log: { level: info }\n"), Env())).empty());
}

}  // namespace
}  // namespace streamcar::config
