// The outcome table of SPEC 3.2, row by row, without sockets.

#include "sidecar/delivery/outcome.h"

#include <gtest/gtest.h>

namespace streamcar::delivery {
namespace {

OutcomePolicy Policy(int max_attempts = 5) {
  OutcomePolicy p;
  p.backoff = {Millis(1000), Millis(60000), 2.0, 0.0};
  p.max_attempts = max_attempts;
  p.reject_statuses = {400, 413, 415, 422};
  return p;
}

HandlerResponse Answer(int status, std::string body = "", std::string retry_after = "") {
  HandlerResponse r;
  r.status = status;
  r.body = std::move(body);
  r.retry_after = std::move(retry_after);
  return r;
}

constexpr int64_t kNow = 1445412480000;

TEST(Outcome, TwoXxIsSuccess) {
  for (int status : {200, 201, 202, 204}) {
    auto d = Decide(Policy(), Answer(status), 1, kNow, 0.5);
    EXPECT_EQ(d.action, Action::kAck);
    EXPECT_STREQ(d.metric, "success");
  }
  EXPECT_EQ(Decide(Policy(), Answer(200, "not json"), 1, kNow, 0.5).action, Action::kAck);
  EXPECT_EQ(Decide(Policy(), Answer(200, R"({"ok":true})"), 1, kNow, 0.5).action, Action::kAck);
  EXPECT_EQ(Decide(Policy(), Answer(200, R"(["status","RETRY"])"), 1, kNow, 0.5).action,
            Action::kAck);
}

TEST(Outcome, TwoXxWithRetryBodyRetriesInAnyCase) {
  for (const char* body :
       {R"({"status":"RETRY"})", R"({"status":"retry"})", R"( {"status" : "Retry", "x":1})"}) {
    auto d = Decide(Policy(), Answer(200, body), 1, kNow, 0.5);
    EXPECT_EQ(d.action, Action::kRetry) << body;
    EXPECT_STREQ(d.metric, "retry");
    EXPECT_EQ(d.delay, Millis(1000));
  }
}

TEST(Outcome, TwoXxWithDropBodyDeadLettersNow) {
  auto d = Decide(Policy(), Answer(200, R"({"status":"drop"})"), 1, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kDeadLetter);
  EXPECT_EQ(d.reason, "dropped");
  EXPECT_STREQ(d.metric, "reject");
  EXPECT_EQ(d.status_text, "200");
}

TEST(Outcome, RejectStatusDeadLettersWithoutRetry) {
  auto d = Decide(Policy(), Answer(422, "bad field"), 1, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kDeadLetter);
  EXPECT_EQ(d.reason, "rejected");
  EXPECT_EQ(d.status_text, "422");
  EXPECT_EQ(d.error, "bad field");
}

TEST(Outcome, OtherStatusesRetryWithBackoff) {
  for (int status : {404, 429, 500, 503, 302}) {
    auto d = Decide(Policy(), Answer(status), 3, kNow, 0.5);
    EXPECT_EQ(d.action, Action::kRetry) << status;
    EXPECT_EQ(d.delay, Millis(4000));
  }
}

TEST(Outcome, RetryAfterReplacesBackoffCappedAtMax) {
  EXPECT_EQ(Decide(Policy(), Answer(503, "", "7"), 1, kNow, 0.5).delay, Millis(7000));
  EXPECT_EQ(Decide(Policy(), Answer(429, "", "3600"), 1, kNow, 0.5).delay, Millis(60000));
  EXPECT_EQ(Decide(Policy(), Answer(503, "", "Wed, 21 Oct 2015 07:28:05 GMT"), 1, kNow, 0.5).delay,
            Millis(5000));
  // Unreadable: the computed backoff.
  EXPECT_EQ(Decide(Policy(), Answer(503, "", "later"), 1, kNow, 0.5).delay, Millis(1000));
}

TEST(Outcome, TimeoutAndResetRetry) {
  HandlerResponse timeout;
  timeout.kind = HandlerResponse::Kind::kTimeout;
  auto d = Decide(Policy(), timeout, 1, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kRetry);
  EXPECT_STREQ(d.metric, "timeout");
  EXPECT_EQ(d.status_text, "timeout");
  HandlerResponse reset;
  reset.kind = HandlerResponse::Kind::kError;
  reset.error = "connection reset";
  d = Decide(Policy(), reset, 1, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kRetry);
  EXPECT_STREQ(d.metric, "error");
}

TEST(Outcome, RefusedIsNotAnAttempt) {
  HandlerResponse refused;
  refused.kind = HandlerResponse::Kind::kRefused;
  auto d = Decide(Policy(1), refused, 1, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_STREQ(d.metric, "");
}

TEST(Outcome, FailureAtMaxAttemptsDeadLetters) {
  auto d = Decide(Policy(3), Answer(500, "boom"), 3, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kDeadLetter);
  EXPECT_EQ(d.reason, "max_attempts");
  EXPECT_EQ(d.status_text, "500");
  EXPECT_STREQ(d.metric, "retry");
  EXPECT_EQ(Decide(Policy(3), Answer(500), 2, kNow, 0.5).action, Action::kRetry);
}

TEST(Outcome, ZeroMaxAttemptsRetriesForever) {
  EXPECT_EQ(Decide(Policy(0), Answer(500), 1000, kNow, 0.5).action, Action::kRetry);
  EXPECT_FALSE(ExhaustedOnArrival(Policy(0), 1000));
}

TEST(Outcome, ExhaustedOnArrivalOnlyPastMax) {
  EXPECT_FALSE(ExhaustedOnArrival(Policy(5), 5));
  EXPECT_TRUE(ExhaustedOnArrival(Policy(5), 6));
}

TEST(Outcome, ErrorIsClippedToOneKiB) {
  auto d = Decide(Policy(), Answer(422, std::string(5000, 'x')), 1, kNow, 0.5);
  EXPECT_EQ(d.error.size(), 1024u);
}

TEST(Outcome, BatchFailures) {
  auto drop = DecideBatchFailure(Policy(), true, "bad", 1, "", 0, 0.5);
  EXPECT_EQ(drop.action, Action::kDeadLetter);
  EXPECT_EQ(drop.reason, "dropped");
  auto retry = DecideBatchFailure(Policy(), false, "later", 1, "", 0, 0.5);
  EXPECT_EQ(retry.action, Action::kRetry);
  EXPECT_EQ(DecideBatchFailure(Policy(2), false, "later", 2, "", 0, 0.5).reason, "max_attempts");
}

TEST(Outcome, BatchRetryHonoursRetryAfter) {
  const OutcomePolicy policy = Policy();
  const Millis backoff = DecideBatchFailure(policy, false, "later", 1, "", 0, 0.5).delay;
  auto seconds = DecideBatchFailure(policy, false, "later", 1, "7", 0, 0.5);
  EXPECT_EQ(seconds.action, Action::kRetry);
  EXPECT_EQ(seconds.delay, Millis(7000));
  EXPECT_NE(seconds.delay, backoff);
  // An HTTP date, relative to now.
  const int64_t now_ms = 1'445'412'480'000;  // Wed, 21 Oct 2015 07:28:00 GMT
  auto date =
      DecideBatchFailure(policy, false, "later", 1, "Wed, 21 Oct 2015 07:28:03 GMT", now_ms, 0.5);
  EXPECT_EQ(date.delay, Millis(3000));
  // Capped at max_backoff, like a single entry's.
  auto capped = DecideBatchFailure(policy, false, "later", 1, "100000", 0, 0.5);
  EXPECT_EQ(capped.delay, policy.backoff.max);
  // A DROP is dead-lettered whatever Retry-After says; an exhausted entry too.
  EXPECT_EQ(DecideBatchFailure(policy, true, "bad", 1, "7", 0, 0.5).action, Action::kDeadLetter);
  EXPECT_EQ(DecideBatchFailure(Policy(2), false, "later", 2, "7", 0, 0.5).reason, "max_attempts");
}

}  // namespace
}  // namespace streamcar::delivery
