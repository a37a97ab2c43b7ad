#include "sidecar/common/text.h"

#include <gtest/gtest.h>

#include <string>

namespace streamcar {
namespace {

TEST(Text, EditDistance) {
  EXPECT_EQ(EditDistance("max_attemps", "max_attempts"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("same", "same"), 0u);
}

TEST(Text, ClosestMatchOnlyWhenClose) {
  EXPECT_EQ(ClosestMatch("concurency", {"url", "concurrency", "timeout"}), "concurrency");
  EXPECT_EQ(ClosestMatch("zzz", {"url", "timeout"}), std::nullopt);
}

TEST(Text, Utf8Validation) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_TRUE(IsValidUtf8(std::string("nul\0inside", 10)));
  EXPECT_FALSE(IsValidUtf8("\xFF\xFE"));
  EXPECT_FALSE(IsValidUtf8("\xC3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
}

TEST(Text, Utf8ValidationAtEveryOffset) {
  // ASCII is checked eight bytes at a time: a bad byte, a truncated sequence and a valid
  // multi-byte character are found wherever they fall against those words.
  for (size_t at = 0; at < 24; ++at) {
    const std::string before(at, 'a');
    const std::string after(24 - at, 'z');
    EXPECT_FALSE(IsValidUtf8(before + "\xFF" + after)) << at;
    EXPECT_FALSE(IsValidUtf8(before + "\xE2\x82")) << at;          // truncated at the end
    EXPECT_FALSE(IsValidUtf8(before + "\xC0\xAF" + after)) << at;  // overlong
    EXPECT_TRUE(IsValidUtf8(before + "\xE2\x82\xAC" + after)) << at;
    EXPECT_TRUE(IsValidUtf8(before + "\xF0\x9F\x98\x80")) << at;
    EXPECT_TRUE(IsValidUtf8(before)) << at;
  }
}

TEST(Text, EntryIds) {
  auto id = ParseEntryId("1700000000000-7");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->ms, 1700000000000u);
  EXPECT_EQ(id->seq, 7u);
  EXPECT_EQ(ParseEntryId("1700000000000")->seq, 0u);
  EXPECT_FALSE(ParseEntryId("abc"));
  EXPECT_FALSE(ParseEntryId("1-"));
  EXPECT_FALSE(ParseEntryId("-1"));
  EXPECT_LT(*ParseEntryId("1-9"), *ParseEntryId("2-0"));
}

TEST(Text, PrintableOneLine) {
  EXPECT_EQ(PrintableOneLine("plain: caf\xC3\xA9"), "plain: caf\xC3\xA9");
  EXPECT_EQ(PrintableOneLine("a\nb\tc\r"), "a\\nb\\tc\\r");
  EXPECT_EQ(PrintableOneLine(std::string("nul\0", 4)), "nul\\x00");
  EXPECT_EQ(PrintableOneLine("bad \xFF byte"), "bad \\xFF byte");
}

TEST(Text, Rfc3339) { EXPECT_EQ(Rfc3339Millis(1700000000123), "2023-11-14T22:13:20.123Z"); }

}  // namespace
}  // namespace streamcar
