#include "sidecar/common/log.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

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

}  // namespace
}  // namespace streamcar
