// format dapr: Dapr's answers (SPEC 11) — what a subscriber written for Dapr's runtime means by
// its status, its body and a 404 — read by the outcome policy, without sockets.

#include <gtest/gtest.h>

#include "sidecar/delivery/outcome.h"
#include "sidecar/delivery/response_parser.h"

namespace streamcar::delivery {
namespace {

OutcomePolicy DaprPolicy() {
  OutcomePolicy p;
  p.backoff = {Millis(1000), Millis(60000), 2.0, 0.0};
  p.max_attempts = 5;
  p.reject_statuses = {400, 413, 415, 422};
  p.dapr_answers = true;
  return p;
}

HandlerResponse Answer(int status, std::string body = "") {
  HandlerResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

constexpr int64_t kNow = 1445412480000;

TEST(DaprVerdict, StatusWordsInAnyCase) {
  EXPECT_EQ(ParseDaprVerdict(R"({"status":"SUCCESS"})"), BodyVerdict::kSuccess);
  EXPECT_EQ(ParseDaprVerdict(R"({"status":"success"})"), BodyVerdict::kSuccess);
  EXPECT_EQ(ParseDaprVerdict(R"({"status":"RETRY"})"), BodyVerdict::kRetry);
  EXPECT_EQ(ParseDaprVerdict(R"({"status":"Retry"})"), BodyVerdict::kRetry);
  EXPECT_EQ(ParseDaprVerdict(R"({"status":"DROP"})"), BodyVerdict::kDrop);
  EXPECT_EQ(ParseDaprVerdict("\xEF\xBB\xBF{\"status\":\"DROP\"}"), BodyVerdict::kDrop);
}

// Dapr: an empty body, a body that is not JSON, an object without status and an empty status
// are success; a status word Dapr does not know is an error it retries.
TEST(DaprVerdict, WhatDaprCallsSuccessAndWhatItRetries) {
  EXPECT_EQ(ParseDaprVerdict(""), BodyVerdict::kSuccess);
  EXPECT_EQ(ParseDaprVerdict("OK"), BodyVerdict::kSuccess);
  EXPECT_EQ(ParseDaprVerdict(R"({"success":true})"), BodyVerdict::kSuccess);
  EXPECT_EQ(ParseDaprVerdict(R"({"status":""})"), BodyVerdict::kSuccess);
  EXPECT_EQ(ParseDaprVerdict(R"({"status":42})"), BodyVerdict::kSuccess);
  EXPECT_EQ(ParseDaprVerdict(R"({"status":"LATER"})"), BodyVerdict::kRetry);
  EXPECT_EQ(ParseDaprVerdict(R"({"status":"SUCCESS","status":"DROP"})"), BodyVerdict::kRetry);
  // The generic reading (other formats) keeps SPEC 3.2: an unknown word is success there.
  EXPECT_EQ(ParseEntryVerdict(R"({"status":"LATER"})"), BodyVerdict::kSuccess);
}

TEST(DaprOutcome, AnEmpty2xxIsSuccess) {
  for (int status : {200, 201, 204}) {
    const auto d = Decide(DaprPolicy(), Answer(status), 1, kNow, 0.5);
    EXPECT_EQ(d.action, Action::kAck) << status;
    EXPECT_EQ(d.outcome, DeliveryOutcome::kSuccess);
  }
}

TEST(DaprOutcome, RetryRetriesAndDropDeadLettersAsDropped) {
  const auto retry = Decide(DaprPolicy(), Answer(200, R"({"status":"RETRY"})"), 1, kNow, 0.5);
  EXPECT_EQ(retry.action, Action::kRetry);
  EXPECT_EQ(retry.delay, Millis(1000));
  const auto last = Decide(DaprPolicy(), Answer(200, R"({"status":"RETRY"})"), 5, kNow, 0.5);
  EXPECT_EQ(last.action, Action::kDeadLetter);
  EXPECT_EQ(Name(last.reason), "max_attempts");
  const auto drop = Decide(DaprPolicy(), Answer(200, R"({"status":"DROP"})"), 1, kNow, 0.5);
  EXPECT_EQ(drop.action, Action::kDeadLetter);
  EXPECT_EQ(Name(drop.reason), "dropped");
  EXPECT_EQ(drop.outcome, DeliveryOutcome::kReject);
}

TEST(DaprOutcome, A404DeadLettersAsDroppedOnlyForDapr) {
  const auto d = Decide(DaprPolicy(), Answer(404, "no route"), 1, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kDeadLetter);
  EXPECT_EQ(Name(d.reason), "dropped");
  EXPECT_EQ(d.status_text, "404");
  EXPECT_EQ(d.error, "no route");
  OutcomePolicy plain = DaprPolicy();
  plain.dapr_answers = false;
  EXPECT_EQ(Decide(plain, Answer(404), 1, kNow, 0.5).action, Action::kRetry);
  // Every other status keeps SPEC 3.2: reject_statuses dead-letter, the rest retry.
  EXPECT_EQ(Name(Decide(DaprPolicy(), Answer(422), 1, kNow, 0.5).reason), "rejected");
  EXPECT_EQ(Decide(DaprPolicy(), Answer(500), 1, kNow, 0.5).action, Action::kRetry);
}

TEST(DaprOutcome, ThePolicyOfADaprSubscriptionReadsDaprAnswers) {
  config::Subscription sub;
  sub.handler.format = config::Format::kDapr;
  EXPECT_TRUE(OutcomePolicyOf(sub).dapr_answers);
  sub.handler.format = config::Format::kCloudEventsStructured;
  EXPECT_FALSE(OutcomePolicyOf(sub).dapr_answers);
}

}  // namespace
}  // namespace streamcar::delivery
