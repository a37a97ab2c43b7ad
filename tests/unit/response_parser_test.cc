#include "sidecar/delivery/response_parser.h"

#include <gtest/gtest.h>

#include <string>

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

// A UTF-8 byte-order mark before the JSON is skipped (RFC 8259 lets a parser ignore it): the
// review's BOM-prefixed {"status":"DROP"} was acknowledged (issue 29).
TEST(ResponseParser, AByteOrderMarkBeforeTheJsonIsSkipped) {
  const std::string bom = "\xEF\xBB\xBF";
  EXPECT_EQ(ParseEntryVerdict(bom + R"({"status":"DROP"})"), BodyVerdict::kDrop);
  EXPECT_EQ(ParseEntryVerdict(bom + R"(  {"status":"retry"})"), BodyVerdict::kRetry);
  EXPECT_EQ(ParseEntryVerdict(bom), BodyVerdict::kSuccess);
  EXPECT_EQ(ParseEntryVerdict(bom + bom + R"({"status":"DROP"})"), BodyVerdict::kSuccess);
  const BatchAnswer batch =
      ParseBatchAnswer(bom + R"({"failures":[{"id":"1-0","status":"DROP"}]})");
  ASSERT_EQ(batch.failures.size(), 1u);
  EXPECT_EQ(batch.failures[0].verdict, BodyVerdict::kDrop);
}

// "status" named twice is ambiguous (first or last wins, depending on the parser): a retry, never
// an acknowledgement nor a drop (issue 29).
TEST(ResponseParser, StatusNamedTwiceIsARetry) {
  EXPECT_EQ(ParseEntryVerdict(R"({"status":"ok","status":"RETRY"})"), BodyVerdict::kRetry);
  EXPECT_EQ(ParseEntryVerdict(R"({"status":"DROP","status":"ok"})"), BodyVerdict::kRetry);
  EXPECT_EQ(ParseEntryVerdict(R"({"status":"ok","status":"ok"})"), BodyVerdict::kRetry);
  // Nested objects are not the answer's own status.
  EXPECT_EQ(ParseEntryVerdict(R"({"status":"ok","detail":{"status":"DROP"}})"),
            BodyVerdict::kSuccess);
  const BatchAnswer batch =
      ParseBatchAnswer(R"({"failures":[{"id":"1-0","status":"DROP","status":"DROP"}]})");
  ASSERT_EQ(batch.failures.size(), 1u);
  EXPECT_EQ(batch.failures[0].verdict, BodyVerdict::kRetry);
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
