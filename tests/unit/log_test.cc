#include "sidecar/common/log.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace streamcar {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogSinkForTest([this](std::string_view line) { lines_.emplace_back(line); });
  }
  void TearDown() override { SetLogSinkForTest(nullptr); }
  std::vector<std::string> lines_;
};

TEST_F(LogTest, OneJsonObjectPerLineWithContext) {
  LogInfo("hello \"world\"", {{"subscription", "orders/billing"}, {"attempts", 3}, {"ok", true}});
  ASSERT_EQ(lines_.size(), 1u);
  rapidjson::Document d;
  d.Parse(lines_[0].c_str());
  ASSERT_FALSE(d.HasParseError()) << lines_[0];
  EXPECT_TRUE(d.HasMember("ts"));
  EXPECT_STREQ(d["level"].GetString(), "info");
  EXPECT_STREQ(d["msg"].GetString(), "hello \"world\"");
  EXPECT_STREQ(d["subscription"].GetString(), "orders/billing");
  EXPECT_EQ(d["attempts"].GetInt(), 3);
  EXPECT_EQ(lines_[0].find('\n'), std::string::npos);
}

TEST_F(LogTest, RepeatingErrorsAreHeldBackAndCounted) {
  for (int i = 0; i < 50; ++i) LogError("redis unreachable", {{"subscription", "s"}});
  ASSERT_EQ(lines_.size(), 1u);
  // A different subscription is a different error.
  LogError("redis unreachable", {{"subscription", "t"}});
  EXPECT_EQ(lines_.size(), 2u);
}

TEST_F(LogTest, EventsAboutDifferentEntriesAreAllWritten) {
  for (int i = 0; i < 5; ++i)
    LogWarn("entry dead-lettered", {{"subscription", "s"}, {"id", std::to_string(i)}});
  EXPECT_EQ(lines_.size(), 5u);
}

TEST_F(LogTest, InfoIsNeverRateLimited) {
  for (int i = 0; i < 5; ++i) LogInfo("tick");
  EXPECT_EQ(lines_.size(), 5u);
}

// The rate limiter's table, with time moved by hand.
class LogRepeatTest : public LogTest {
 protected:
  void SetUp() override {
    LogTest::SetUp();
    SetLogClockForTest(&clock_);
  }
  void TearDown() override {
    SetLogClockForTest(nullptr);
    LogTest::TearDown();
  }
  rapidjson::Document Parse(size_t index) {
    rapidjson::Document d;
    d.Parse(lines_.at(index).c_str());
    EXPECT_FALSE(d.HasParseError()) << lines_[index];
    return d;
  }
  ManualClock clock_;
};

TEST_F(LogRepeatTest, ARepeatingErrorIsWrittenOncePerSecondWithItsCount) {
  for (int i = 0; i < 10; ++i) {
    LogError("redis unreachable", {{"subscription", "s"}});
    clock_.Advance(Millis(100));
  }
  ASSERT_EQ(lines_.size(), 1u);
  LogError("redis unreachable", {{"subscription", "s"}});  // 1 s after the first
  ASSERT_EQ(lines_.size(), 2u);
  auto d = Parse(1);
  ASSERT_TRUE(d.HasMember("repeated")) << lines_[1];
  EXPECT_EQ(d["repeated"].GetInt(), 9);
}

TEST_F(LogRepeatTest, HeldBackCountIsReportedOnceTheErrorStopsRepeating) {
  for (int i = 0; i < 5; ++i) LogError("retry claim failed", {{"subscription", "s"}});
  ASSERT_EQ(lines_.size(), 1u);
  clock_.Advance(Millis(1500));
  LogInfo("something else");  // any later line runs the sweep
  ASSERT_EQ(lines_.size(), 3u);
  auto summary = Parse(1);
  EXPECT_STREQ(summary["msg"].GetString(), "retry claim failed");
  EXPECT_STREQ(summary["level"].GetString(), "error");
  EXPECT_STREQ(summary["subscription"].GetString(), "s");
  ASSERT_TRUE(summary.HasMember("repeated")) << lines_[1];
  EXPECT_EQ(summary["repeated"].GetInt(), 4);
  EXPECT_STREQ(Parse(2)["msg"].GetString(), "something else");
  EXPECT_EQ(LogRepeatKeysForTest(), 0u);
  // Reported once: later lines do not report it again.
  clock_.Advance(Millis(1500));
  LogInfo("again");
  EXPECT_EQ(lines_.size(), 4u);
}

TEST_F(LogRepeatTest, KeysOlderThanTheWindowAreDropped) {
  for (int i = 0; i < 100; ++i) {
    LogWarn("entry dead-lettered", {{"subscription", "s"}, {"id", std::to_string(i) + "-0"}});
  }
  EXPECT_EQ(lines_.size(), 100u);  // events about different entries are all written
  EXPECT_EQ(LogRepeatKeysForTest(), 100u);
  clock_.Advance(Millis(1000));
  LogWarn("entry dead-lettered", {{"subscription", "s"}, {"id", "100-0"}});
  EXPECT_EQ(LogRepeatKeysForTest(), 1u);
  EXPECT_EQ(lines_.size(), 101u);  // nothing was held back: no summary lines
}

TEST_F(LogRepeatTest, TableStaysBoundedAfter100kDistinctIds) {
  for (int i = 0; i < 100'000; ++i) {
    LogWarn("entry dead-lettered", {{"subscription", "s"}, {"id", std::to_string(i) + "-0"}});
    if (i % 1000 == 999) clock_.Advance(Millis(100));  // 10,000 dead letters a second
    ASSERT_LE(LogRepeatKeysForTest(), kMaxRepeatKeys) << "after " << i;
  }
  EXPECT_EQ(lines_.size(), 100'000u);  // every distinct event is still written
  clock_.Advance(Millis(2000));
  LogInfo("quiet");
  EXPECT_EQ(LogRepeatKeysForTest(), 0u);
}

TEST_F(LogRepeatTest, AFullTableStillRateLimitsTheKeysItHolds) {
  for (size_t i = 0; i < kMaxRepeatKeys + 10; ++i) {
    LogWarn("entry dead-lettered", {{"id", std::to_string(i) + "-0"}});
  }
  EXPECT_EQ(LogRepeatKeysForTest(), kMaxRepeatKeys);
  const size_t written = lines_.size();
  for (int i = 0; i < 20; ++i) LogWarn("entry dead-lettered", {{"id", "0-0"}});
  EXPECT_EQ(lines_.size(), written);
}

// An unknown STREAMCAR_LOG_LEVEL is an error naming the value, never a silent "info".
TEST(LogLevelFromEnv, KnownLevelsApplyAndAnUnknownOneIsAnError) {
  ::setenv("STREAMCAR_LOG_LEVEL", "warn", 1);
  EXPECT_TRUE(SetLogLevelFromEnv().ok());
  ::setenv("STREAMCAR_LOG_LEVEL", "", 1);
  EXPECT_TRUE(SetLogLevelFromEnv().ok());
  ::setenv("STREAMCAR_LOG_LEVEL", "verbose", 1);
  const Status unknown = SetLogLevelFromEnv();
  EXPECT_EQ(unknown.code(), StatusCode::kInvalid);
  EXPECT_NE(unknown.message().find("STREAMCAR_LOG_LEVEL"), std::string::npos) << unknown.message();
  EXPECT_NE(unknown.message().find("\"verbose\""), std::string::npos) << unknown.message();
  ::unsetenv("STREAMCAR_LOG_LEVEL");
  SetLogLevel(LogLevel::kInfo);
}

// The one parser both the variable and the file's log.level use: every name round-trips, and an
// unknown one says what to use, with no prefix (the caller names its source).
TEST(LogLevelParse, EveryNameRoundTripsAndAnUnknownOneSaysWhatToUse) {
  for (const LogLevel level :
       {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    auto parsed = ParseLogLevel(LogLevelName(level));
    ASSERT_TRUE(parsed.ok()) << LogLevelName(level);
    EXPECT_EQ(*parsed, level);
  }
  auto unknown = ParseLogLevel("Debug");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "unknown level \"Debug\" (use debug, info, warn or error)");
}

}  // namespace
}  // namespace streamcar
