#include "sidecar/common/duration.h"

#include <gtest/gtest.h>

namespace streamcar {
namespace {

Millis Parse(const std::string& text) {
  std::string error;
  auto value = ParseDuration(text, &error);
  EXPECT_TRUE(value.has_value()) << text << ": " << error;
  return value.value_or(Millis(-1));
}

std::string ErrorOf(const std::string& text) {
  std::string error;
  EXPECT_FALSE(ParseDuration(text, &error).has_value()) << text;
  return error;
}

TEST(Duration, ParsesEachUnit) {
  EXPECT_EQ(Parse("250ms"), Millis(250));
  EXPECT_EQ(Parse("10s"), Millis(10000));
  EXPECT_EQ(Parse("2m"), Millis(120000));
  EXPECT_EQ(Parse("1h"), Millis(3600000));
  EXPECT_EQ(Parse("0s"), Millis(0));
}

TEST(Duration, CombinesUnits) {
  EXPECT_EQ(Parse("1m30s"), Millis(90000));
  EXPECT_EQ(Parse("1h2m3s4ms"), Millis(3723004));
}

TEST(Duration, RejectsBareNumber) { EXPECT_NE(ErrorOf("10").find("no unit"), std::string::npos); }
TEST(Duration, RejectsNegative) { EXPECT_NE(ErrorOf("-5s").find("negative"), std::string::npos); }
TEST(Duration, RejectsUnknownUnit) {
  EXPECT_NE(ErrorOf("10d").find("unknown unit \"d\""), std::string::npos);
}
TEST(Duration, RejectsEmptyAndGarbage) {
  ErrorOf("");
  ErrorOf("s");
  ErrorOf("1.5s");
  ErrorOf("ten seconds");
}

TEST(Duration, FormatsCanonically) {
  EXPECT_EQ(FormatDuration(Millis(0)), "0s");
  EXPECT_EQ(FormatDuration(Millis(250)), "250ms");
  EXPECT_EQ(FormatDuration(Millis(90000)), "1m30s");
  EXPECT_EQ(FormatDuration(Millis(3723004)), "1h2m3s4ms");
}

TEST(Duration, FormatParsesBack) {
  for (int64_t ms : {0, 1, 999, 1000, 61001, 7200000}) {
    EXPECT_EQ(Parse(FormatDuration(Millis(ms))), Millis(ms));
  }
}

}  // namespace
}  // namespace streamcar
