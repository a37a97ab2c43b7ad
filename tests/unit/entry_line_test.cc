// How `read` and `tail` print an entry for people: one line whatever the entry holds.

#include <gtest/gtest.h>

#include "sidecar/cli/log_cli_support.h"

namespace streamcar::cli {
namespace {

TEST(EntryLineTest, OneLineWithTheTimeAndQuotedValues) {
  StreamEntry entry;
  entry.id = "1796049000123-4";
  entry.fields = {{"plain", "value"},
                  {"spaced", "two words"},
                  {"quote", "say \"hi\""},
                  {"eq", "a=b"},
                  {"empty", ""},
                  {"lines", "one\ntwo\r\n"},
                  {"bin", std::string("\xff\x00", 2)}};
  EXPECT_EQ(EntryLine(entry),
            "1796049000123-4  2026-11-30T14:30:00.123Z  plain=value spaced=\"two words\" "
            "quote=\"say \\\"hi\\\"\" eq=\"a=b\" empty=\"\" lines=one\\ntwo\\r\\n "
            "bin=\\xFF\\x00");
}

}  // namespace
}  // namespace streamcar::cli
