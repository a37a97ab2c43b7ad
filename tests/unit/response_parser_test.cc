#include "sidecar/delivery/response_parser.h"

#include <gtest/gtest.h>

namespace streamcar::delivery {
namespace {

TEST(ResponseParser, EntryVerdicts) {
  EXPECT_EQ(ParseEntryVerdict(""), BodyVerdict::kSuccess);
  EXPECT_EQ(ParseEntryVerdict("OK"), BodyVerdict::kSuccess);
  EXPECT_EQ(ParseEntryVerdict(R"({"status":"RETRY"})"), BodyVerdict::kRetry);
  EXPECT_EQ(ParseEntryVerdict(R"({"status":"DrOp"})"), BodyVerdict::kDrop);
  EXPECT_EQ(ParseEntryVerdict(R"({"status":"done"})"), BodyVerdict::kSuccess);
  EXPECT_EQ(ParseEntryVerdict(R"({"status":1})"), BodyVerdict::kSuccess);
  EXPECT_EQ(ParseEntryVerdict(R"({"status":"RETRY")"), BodyVerdict::kSuccess);  // malformed
}

TEST(ResponseParser, BatchWithoutFailuresIsAllSuccess) {
  EXPECT_FALSE(ParseBatchAnswer("").has_failures);
  EXPECT_FALSE(ParseBatchAnswer(R"({"ok":true})").has_failures);
  EXPECT_FALSE(ParseBatchAnswer("garbage").has_failures);
}

TEST(ResponseParser, BatchFailures) {
  auto answer = ParseBatchAnswer(
      R"({"failures":[{"id":"1-0","status":"RETRY","error":"db down"},{"id":"2-0","status":"drop"},)"
      R"({"status":"RETRY"},{"id":"3-0"}, 7]})");
  ASSERT_TRUE(answer.has_failures);
  ASSERT_EQ(answer.failures.size(), 3u);
  EXPECT_EQ(answer.failures[0].id, "1-0");
  EXPECT_EQ(answer.failures[0].verdict, BodyVerdict::kRetry);
  EXPECT_EQ(answer.failures[0].error, "db down");
  EXPECT_EQ(answer.failures[1].verdict, BodyVerdict::kDrop);
  EXPECT_EQ(answer.failures[2].verdict, BodyVerdict::kRetry);  // no status: a failure to retry
  EXPECT_EQ(answer.malformed, 2);
}

}  // namespace
}  // namespace streamcar::delivery
