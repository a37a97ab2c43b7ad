// Batch append bodies of the log API (issue 29): a JSON array of entry objects, and the receipts.

#include <gtest/gtest.h>

#include <string>

#include "sidecar/log/api_json.h"

namespace streamcar::log {
namespace {

using Fields = EntryFields;

TEST(ApiBatchJsonTest, AnArrayIsOneEntryPerObjectInOrder) {
  auto entries =
      EntriesFromJson(R"( [{"a":"1","n":2.50}, {"b":{"x":[1, 2]}}, {"a":"3","a":"4"}] )");
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0], (Fields{{"a", "1"}, {"n", "2.50"}}));
  EXPECT_EQ((*entries)[1], (Fields{{"b", R"({"x":[1,2]})"}}));
  EXPECT_EQ((*entries)[2], (Fields{{"a", "3"}, {"a", "4"}}));
}

TEST(ApiBatchJsonTest, RefusesWhatIsNotAnArrayOfEntries) {
  for (const char* bad :
       {"[]", "[{}]", R"([{"a":"1"},{}])", R"([{"a":"1"}, 1])", "[[]]", R"([[{"a":"1"}]])",
        R"([{"a":"1"}] [])", R"([{"a":"1"},])", R"({"a":"1"})", "[\"x\"]", "[null]", "["}) {
    auto entries = EntriesFromJson(bad);
    EXPECT_FALSE(entries.ok()) << bad;
    if (!entries.ok()) {
      EXPECT_EQ(entries.status().code(), StatusCode::kInvalid) << bad;
    }
  }
  EXPECT_NE(EntriesFromJson(R"([{"a":"1"},{}])").status().message().find("entry 1"),
            std::string::npos);
}

TEST(ApiBatchJsonTest, OnlyAnArrayBodyIsABatch) {
  EXPECT_TRUE(IsJsonArray("[{\"a\":\"1\"}]"));
  EXPECT_TRUE(IsJsonArray(" \r\n\t["));
  EXPECT_FALSE(IsJsonArray("{\"a\":[1]}"));
  EXPECT_FALSE(IsJsonArray(""));
  EXPECT_FALSE(IsJsonArray("x["));
  // A single entry's body stays an object: an array is refused there as before.
  EXPECT_FALSE(FieldsFromJson(R"([{"a":"1"}])").ok());
}

TEST(ApiBatchJsonTest, ReceiptsAreTheIdsInOrder) {
  EXPECT_EQ(BatchReceiptsJson({"1-0", "0-9"}, "fe\"ed"),
            R"({"stream":"fe\"ed","ids":["1-0","0-9"]})");
}

}  // namespace
}  // namespace streamcar::log
