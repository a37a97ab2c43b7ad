// The outcome table of SPEC 3.2, row by row, without sockets.

#include "sidecar/delivery/outcome.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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
    EXPECT_EQ(Name(d.outcome), "success");
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
    EXPECT_EQ(Name(d.outcome), "retry");
    EXPECT_EQ(d.delay, Millis(1000));
  }
}

TEST(Outcome, TwoXxWithDropBodyDeadLettersNow) {
  auto d = Decide(Policy(), Answer(200, R"({"status":"drop"})"), 1, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kDeadLetter);
  EXPECT_EQ(Name(d.reason), "dropped");
  EXPECT_EQ(Name(d.outcome), "reject");
  EXPECT_EQ(d.status_text, "200");
}

TEST(Outcome, RejectStatusDeadLettersWithoutRetry) {
  auto d = Decide(Policy(), Answer(422, "bad field"), 1, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kDeadLetter);
  EXPECT_EQ(Name(d.reason), "rejected");
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

// Retry-After never brings a retry below initial_backoff (review F9, issue 29): "0" or a date in
// the past used to give a zero delay, a tight loop through Redis with max_attempts: 0.
TEST(Outcome, RetryAfterNeverGoesBelowInitialBackoff) {
  const Millis initial = Policy().backoff.initial;
  for (const char* value :
       {"0", "Wed, 21 Oct 2015 07:27:00 GMT", "Thu, 01 Jan 1970 00:00:00 GMT"}) {
    EXPECT_EQ(Decide(Policy(0), Answer(503, "", value), 1, kNow, 0.5).delay, initial) << value;
    EXPECT_EQ(Decide(Policy(0), Answer(503, "", value), 9, kNow, 0.5).delay, initial) << value;
    EXPECT_EQ(DecideBatchFailure(Policy(0), false, "later", 1, value, kNow, 0.5).delay, initial)
        << value;
    const std::vector<BatchItem> items = {{"1-0", 1}};
    EXPECT_EQ(DecideBatch(Policy(0), Answer(429, "", value), items, kNow, [] { return 0.5; })
                  .decisions[0]
                  .delay,
              initial)
        << value;
  }
  // Above the floor it is honoured as it is.
  EXPECT_EQ(Decide(Policy(0), Answer(503, "", "2"), 1, kNow, 0.5).delay, Millis(2000));
}

TEST(Outcome, TimeoutAndResetRetry) {
  HandlerResponse timeout;
  timeout.kind = HandlerResponse::Kind::kTimeout;
  auto d = Decide(Policy(), timeout, 1, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kRetry);
  EXPECT_EQ(Name(d.outcome), "timeout");
  EXPECT_EQ(d.status_text, "timeout");
  HandlerResponse reset;
  reset.kind = HandlerResponse::Kind::kError;
  reset.error = "connection reset";
  d = Decide(Policy(), reset, 1, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kRetry);
  EXPECT_EQ(Name(d.outcome), "error");
}

TEST(Outcome, RefusedIsNotAnAttempt) {
  HandlerResponse refused;
  refused.kind = HandlerResponse::Kind::kRefused;
  auto d = Decide(Policy(1), refused, 1, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kHold);
  EXPECT_EQ(Name(d.outcome), "");
}

TEST(Outcome, FailureAtMaxAttemptsDeadLetters) {
  auto d = Decide(Policy(3), Answer(500, "boom"), 3, kNow, 0.5);
  EXPECT_EQ(d.action, Action::kDeadLetter);
  EXPECT_EQ(Name(d.reason), "max_attempts");
  EXPECT_EQ(d.status_text, "500");
  EXPECT_EQ(Name(d.outcome), "retry");
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
  EXPECT_EQ(Name(drop.reason), "dropped");
  auto retry = DecideBatchFailure(Policy(), false, "later", 1, "", 0, 0.5);
  EXPECT_EQ(retry.action, Action::kRetry);
  EXPECT_EQ(Name(DecideBatchFailure(Policy(2), false, "later", 2, "", 0, 0.5).reason),
            "max_attempts");
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
  EXPECT_EQ(Name(DecideBatchFailure(Policy(2), false, "later", 2, "7", 0, 0.5).reason),
            "max_attempts");
}

// DecideBatch (SPEC 3.4): the answer to a batch POST, entry by entry.

const std::vector<BatchItem> kFiveItems = {
    {"1-0", 1}, {"2-0", 1}, {"3-0", 1}, {"4-0", 1}, {"5-0", 1}};

double Half() { return 0.5; }

// DeliveryTest.BatchDeliveryWithFailures: retry the first, drop the second, name an id that is
// not in the batch; the others are accepted.
TEST(Outcome, DecideBatchMatchesFailuresById) {
  const std::string body =
      R"({"failures":[{"id":"1-0","status":"RETRY","error":"later"},)"
      R"({"id":"2-0","status":"DROP","error":"bad"},{"id":"9-9","status":"RETRY"}]})";
  const BatchDecision batch = DecideBatch(Policy(), Answer(200, body), kFiveItems, kNow, Half);
  ASSERT_EQ(batch.decisions.size(), 5u);
  const Decision& retried = batch.decisions[0];
  EXPECT_EQ(retried.action, Action::kRetry);
  EXPECT_EQ(Name(retried.outcome), "retry");
  EXPECT_EQ(retried.delay, Millis(1000));
  EXPECT_EQ(retried.status_text, "200");
  EXPECT_EQ(retried.error, "later");
  const Decision& dropped = batch.decisions[1];
  EXPECT_EQ(dropped.action, Action::kDeadLetter);
  EXPECT_EQ(Name(dropped.reason), "dropped");
  EXPECT_EQ(Name(dropped.outcome), "reject");
  EXPECT_EQ(dropped.status_text, "200");
  EXPECT_EQ(dropped.error, "bad");
  for (size_t i = 2; i < 5; ++i) {
    EXPECT_EQ(batch.decisions[i].action, Action::kAck) << i;
    EXPECT_EQ(Name(batch.decisions[i].outcome), "success") << i;
  }
  EXPECT_EQ(batch.unknown_ids, 1u);
}

TEST(Outcome, DecideBatchOfAnAnswerWithoutFailuresAcceptsEveryEntry) {
  for (const char* body : {"", "ok", R"({"failures":[]})", R"({"status":"RETRY"})"}) {
    const BatchDecision batch = DecideBatch(Policy(), Answer(204, body), kFiveItems, kNow, Half);
    ASSERT_EQ(batch.decisions.size(), 5u) << body;
    for (const auto& decision : batch.decisions) {
      EXPECT_EQ(decision.action, Action::kAck) << body;
      EXPECT_EQ(Name(decision.outcome), "success") << body;
    }
    EXPECT_EQ(batch.unknown_ids, 0u) << body;
  }
}

// The dead letter of a failed item carries the batch's own status, not "200".
TEST(Outcome, DecideBatchFailureCarriesTheAnswersStatus) {
  const BatchDecision batch =
      DecideBatch(Policy(), Answer(207, R"({"failures":[{"id":"3-0","status":"DROP"}]})"),
                  kFiveItems, kNow, Half);
  EXPECT_EQ(batch.decisions[2].action, Action::kDeadLetter);
  EXPECT_EQ(batch.decisions[2].status_text, "207");
}

// Unknown ids and unreadable failure items are counted, never applied to an entry; an id named
// twice decides its entry once (the last naming) and is not unknown.
TEST(Outcome, DecideBatchCountsUnknownIdsAndMalformedItems) {
  const std::string body =
      R"({"failures":[{"id":"7-0"},{"id":"8-0","status":"DROP"},{"status":"DROP"},42,)"
      R"({"id":3},{"id":"4-0","status":"DROP"},{"id":"4-0","status":"RETRY","error":"again"}]})";
  const BatchDecision batch = DecideBatch(Policy(), Answer(200, body), kFiveItems, kNow, Half);
  ASSERT_EQ(batch.decisions.size(), 5u);
  EXPECT_EQ(batch.unknown_ids, 5u);  // 7-0, 8-0, and three items without a string id
  EXPECT_EQ(batch.decisions[3].action, Action::kRetry);
  EXPECT_EQ(batch.decisions[3].error, "again");
  for (size_t i : {0u, 1u, 2u, 4u}) EXPECT_EQ(batch.decisions[i].action, Action::kAck) << i;
}

// DeliveryTest.BatchAnswerThatIsNot2xxAppliesToEveryEntry: SPEC 3.2 for each entry, with its
// own attempts.
TEST(Outcome, DecideBatchOfANon2xxAppliesTheOutcomeTableToEveryEntry) {
  const std::vector<BatchItem> items = {{"1-0", 1}, {"2-0", 3}, {"3-0", 2}};
  const BatchDecision busy = DecideBatch(Policy(3), Answer(503, "busy"), items, kNow, Half);
  ASSERT_EQ(busy.decisions.size(), 3u);
  EXPECT_EQ(busy.decisions[0].action, Action::kRetry);
  EXPECT_EQ(busy.decisions[0].delay, Millis(1000));
  EXPECT_EQ(busy.decisions[1].action, Action::kDeadLetter);  // its third attempt
  EXPECT_EQ(Name(busy.decisions[1].reason), "max_attempts");
  EXPECT_EQ(busy.decisions[2].delay, Millis(2000));
  for (const auto& decision : busy.decisions) {
    EXPECT_EQ(Name(decision.outcome), "retry");
    EXPECT_EQ(decision.status_text, "503");
    EXPECT_EQ(decision.error, "busy");
  }
  EXPECT_EQ(busy.unknown_ids, 0u);

  const BatchDecision rejected = DecideBatch(Policy(3), Answer(422, "schema"), items, kNow, Half);
  for (const auto& decision : rejected.decisions) {
    EXPECT_EQ(decision.action, Action::kDeadLetter);
    EXPECT_EQ(Name(decision.reason), "rejected");
    EXPECT_EQ(Name(decision.outcome), "reject");
    EXPECT_EQ(decision.status_text, "422");
  }

  HandlerResponse timeout;
  timeout.kind = HandlerResponse::Kind::kTimeout;
  for (const auto& decision : DecideBatch(Policy(3), timeout, items, kNow, Half).decisions) {
    EXPECT_EQ(Name(decision.outcome), "timeout");
    EXPECT_EQ(decision.status_text, "timeout");
  }
  // A failures list in a non-2xx answer is not read: the status decides.
  const BatchDecision ignored =
      DecideBatch(Policy(3), Answer(500, R"({"failures":[{"id":"9-9"}]})"), items, kNow, Half);
  EXPECT_EQ(ignored.unknown_ids, 0u);
  EXPECT_EQ(ignored.decisions[0].action, Action::kRetry);
}

// Retry-After replaces the backoff of every retried entry (capped at max_backoff), in a 2xx
// with failures and in a non-2xx alike; DROP and exhausted entries are dead-lettered anyway.
TEST(Outcome, DecideBatchHonoursRetryAfter) {
  const std::vector<BatchItem> items = {{"1-0", 1}, {"2-0", 1}, {"3-0", 2}};
  const std::string body =
      R"({"failures":[{"id":"1-0","status":"RETRY"},{"id":"2-0","status":"DROP"},)"
      R"({"id":"3-0","status":"RETRY"}]})";
  const BatchDecision ok = DecideBatch(Policy(2), Answer(200, body, "7"), items, kNow, Half);
  EXPECT_EQ(ok.decisions[0].action, Action::kRetry);
  EXPECT_EQ(ok.decisions[0].delay, Millis(7000));
  EXPECT_EQ(ok.decisions[1].action, Action::kDeadLetter);
  EXPECT_EQ(Name(ok.decisions[1].reason), "dropped");
  EXPECT_EQ(Name(ok.decisions[2].reason), "max_attempts");

  const BatchDecision busy =
      DecideBatch(Policy(5), Answer(429, "", "Wed, 21 Oct 2015 07:28:03 GMT"), items, kNow, Half);
  for (const auto& decision : busy.decisions) EXPECT_EQ(decision.delay, Millis(3000));
  const BatchDecision capped = DecideBatch(Policy(5), Answer(503, "", "100000"), items, kNow, Half);
  for (const auto& decision : capped.decisions) EXPECT_EQ(decision.delay, Millis(60000));
}

// Each retried entry draws its own jitter; accepted entries draw none.
TEST(Outcome, DecideBatchDrawsTheJitterOncePerDecidedEntry) {
  OutcomePolicy policy = Policy();
  policy.backoff.jitter = 0.5;
  std::vector<double> draws = {0.0, 1.0};
  size_t drawn = 0;
  auto next = [&] { return draws.at(drawn++); };
  const BatchDecision batch = DecideBatch(
      policy, Answer(200, R"({"failures":[{"id":"2-0"},{"id":"4-0"}]})"), kFiveItems, kNow, next);
  EXPECT_EQ(drawn, 2u);
  EXPECT_NE(batch.decisions[1].delay, batch.decisions[3].delay);
  drawn = 0;
  draws = {0.0, 1.0, 0.0, 1.0, 0.0};
  const BatchDecision busy = DecideBatch(policy, Answer(500), kFiveItems, kNow, next);
  EXPECT_EQ(drawn, 5u);
  EXPECT_NE(busy.decisions[0].delay, busy.decisions[1].delay);
}

TEST(Outcome, InvalidAndAcceptedDecisions) {
  const Decision invalid = Decision::Invalid("header value carries a control character");
  EXPECT_EQ(invalid.action, Action::kDeadLetter);
  EXPECT_EQ(Name(invalid.reason), "invalid");
  EXPECT_EQ(invalid.status_text, "none");
  EXPECT_EQ(invalid.error, "header value carries a control character");
  EXPECT_EQ(Name(invalid.outcome), "");  // nothing was delivered
  const Decision accepted = Decision::Accepted();
  EXPECT_EQ(accepted.action, Action::kAck);
  EXPECT_EQ(Name(accepted.outcome), "success");
}

TEST(Outcome, NamesAreTheMetricLabels) {
  std::vector<std::string> outcomes, reasons;
  for (auto outcome : kDeliveryOutcomes) outcomes.emplace_back(Name(outcome));
  for (auto reason : kDeadLetterReasons) reasons.emplace_back(Name(reason));
  EXPECT_EQ(outcomes, (std::vector<std::string>{"success", "retry", "reject", "timeout", "error"}));
  EXPECT_EQ(reasons, (std::vector<std::string>{"max_attempts", "rejected", "dropped", "invalid"}));
  EXPECT_EQ(Name(DeliveryOutcome::kNone), "");
}

}  // namespace
}  // namespace streamcar::delivery
