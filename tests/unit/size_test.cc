#include "sidecar/common/size.h"

#include <gtest/gtest.h>

namespace streamcar {
namespace {

uint64_t Parse(const std::string& text) {
  std::string error;
  auto value = ParseSize(text, &error);
  EXPECT_TRUE(value.has_value()) << text << ": " << error;
  return value.value_or(0);
}

std::string ErrorOf(const std::string& text) {
  std::string error;
  EXPECT_FALSE(ParseSize(text, &error).has_value()) << text;
  return error;
}

TEST(Size, ParsesEachUnit) {
  EXPECT_EQ(Parse("0B"), 0u);
  EXPECT_EQ(Parse("100B"), 100u);
  EXPECT_EQ(Parse("1KiB"), 1024u);
  EXPECT_EQ(Parse("32MiB"), uint64_t{32} << 20);
  EXPECT_EQ(Parse("3GiB"), uint64_t{3} << 30);
}

TEST(Size, RejectsBareNumbers) { EXPECT_NE(ErrorOf("1024").find("no unit"), std::string::npos); }

TEST(Size, RejectsNegativeNumbers) {
  EXPECT_NE(ErrorOf("-1MiB").find("negative"), std::string::npos);
}

TEST(Size, RejectsUnknownUnitsNamingThem) {
  EXPECT_NE(ErrorOf("1MB").find("unknown unit \"MB\""), std::string::npos);
  EXPECT_NE(ErrorOf("1kib").find("unknown unit"), std::string::npos);  // units are case-sensitive
  EXPECT_NE(ErrorOf("1 MiB").find("unknown unit"), std::string::npos);
  EXPECT_NE(ErrorOf("1MiB2KiB").find("unknown unit"), std::string::npos);  // one term only
}

TEST(Size, RejectsEmptyFractionsAndGarbage) {
  EXPECT_FALSE(ErrorOf("").empty());
  EXPECT_FALSE(ErrorOf("1.5MiB").empty());
  EXPECT_FALSE(ErrorOf("MiB").empty());
  EXPECT_FALSE(ErrorOf("+1MiB").empty());
}

TEST(Size, RejectsSizesTooLargeWithoutOverflow) {
  EXPECT_NE(ErrorOf("1025GiB").find("too large"), std::string::npos);
  EXPECT_NE(ErrorOf("99999999999999999999999B").find("too large"), std::string::npos);
  EXPECT_EQ(Parse("1024GiB"), uint64_t{1} << 40);
}

TEST(Size, FormatsCanonically) {
  EXPECT_EQ(FormatSize(0), "0B");
  EXPECT_EQ(FormatSize(512), "512B");
  EXPECT_EQ(FormatSize(1536), "1536B");
  EXPECT_EQ(FormatSize(2048), "2KiB");
  EXPECT_EQ(FormatSize(uint64_t{32} << 20), "32MiB");
  EXPECT_EQ(FormatSize(uint64_t{1} << 30), "1GiB");
  for (uint64_t v : {uint64_t{1}, uint64_t{1000}, uint64_t{5} << 20, (uint64_t{7} << 30) + 1}) {
    EXPECT_EQ(Parse(FormatSize(v)), v);
  }
}

}  // namespace
}  // namespace streamcar
