#include "sidecar/delivery/outcome.h"

#include <algorithm>

#include "sidecar/delivery/response_parser.h"
#include "sidecar/delivery/retry_after.h"

namespace streamcar::delivery {
namespace {

constexpr size_t kErrorLimit = 1024;

std::string Clip(const std::string& text) { return text.substr(0, kErrorLimit); }

// A failed delivery: retry after a delay, or dead-letter once attempts are used up.
Decision RetryOrExhaust(const OutcomePolicy& policy, Decision decision, int attempts,
                        std::optional<Millis> requested_delay, double unit_random) {
  if (policy.max_attempts > 0 && attempts >= policy.max_attempts) {
    decision.action = Action::kDeadLetter;
    decision.reason = "max_attempts";
    return decision;
  }
  decision.action = Action::kRetry;
  decision.delay = requested_delay ? std::min(*requested_delay, policy.backoff.max)
                                   : ComputeBackoff(policy.backoff, attempts, unit_random);
  return decision;
}

}  // namespace

OutcomePolicy OutcomePolicyOf(const config::Subscription& subscription) {
  OutcomePolicy policy;
  policy.backoff.initial = subscription.retry.initial_backoff;
  policy.backoff.max = subscription.retry.max_backoff;
  policy.backoff.multiplier = subscription.retry.multiplier;
  policy.backoff.jitter = subscription.retry.jitter;
  policy.max_attempts = subscription.retry.max_attempts;
  policy.reject_statuses = subscription.handler.reject_statuses;
  return policy;
}

Decision Decide(const OutcomePolicy& policy, const HandlerResponse& response, int attempts,
                int64_t now_unix_ms, double unit_random) {
  Decision decision;
  switch (response.kind) {
    case HandlerResponse::Kind::kRefused:
      decision.action = Action::kHold;
      decision.error = response.error;
      return decision;
    case HandlerResponse::Kind::kTimeout:
      decision.metric = "timeout";
      decision.status_text = "timeout";
      decision.error = Clip(response.error);
      return RetryOrExhaust(policy, std::move(decision), attempts, std::nullopt, unit_random);
    case HandlerResponse::Kind::kError:
      decision.metric = "error";
      decision.status_text = "error";
      decision.error = Clip(response.error);
      return RetryOrExhaust(policy, std::move(decision), attempts, std::nullopt, unit_random);
    case HandlerResponse::Kind::kAnswered:
      break;
  }
  decision.status_text = std::to_string(response.status);
  decision.error = Clip(response.body);
  if (response.status >= 200 && response.status < 300) {
    switch (ParseEntryVerdict(response.body)) {
      case BodyVerdict::kSuccess:
        decision.action = Action::kAck;
        decision.metric = "success";
        decision.error.clear();
        return decision;
      case BodyVerdict::kDrop:
        decision.action = Action::kDeadLetter;
        decision.reason = "dropped";
        decision.metric = "reject";
        return decision;
      case BodyVerdict::kRetry:
        decision.metric = "retry";
        break;
    }
  } else if (std::find(policy.reject_statuses.begin(), policy.reject_statuses.end(),
                       response.status) != policy.reject_statuses.end()) {
    decision.action = Action::kDeadLetter;
    decision.reason = "rejected";
    decision.metric = "reject";
    return decision;
  } else {
    decision.metric = "retry";
  }
  std::optional<Millis> requested;
  if (!response.retry_after.empty()) requested = ParseRetryAfter(response.retry_after, now_unix_ms);
  return RetryOrExhaust(policy, std::move(decision), attempts, requested, unit_random);
}

Decision DecideBatchFailure(const OutcomePolicy& policy, bool drop, const std::string& error,
                            int attempts, const std::string& retry_after, int64_t now_unix_ms,
                            double unit_random) {
  Decision decision;
  decision.status_text = "200";
  decision.error = Clip(error);
  if (drop) {
    decision.action = Action::kDeadLetter;
    decision.reason = "dropped";
    decision.metric = "reject";
    return decision;
  }
  decision.metric = "retry";
  std::optional<Millis> requested;
  if (!retry_after.empty()) requested = ParseRetryAfter(retry_after, now_unix_ms);
  return RetryOrExhaust(policy, std::move(decision), attempts, requested, unit_random);
}

}  // namespace streamcar::delivery
