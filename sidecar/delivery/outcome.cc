#include "sidecar/delivery/outcome.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

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
    decision.reason = DeadLetterReason::kMaxAttempts;
    return decision;
  }
  decision.action = Action::kRetry;
  // A Retry-After replaces the backoff but never goes below initial_backoff: "0" or a date in the
  // past would otherwise make a handler that keeps answering 503 a tight loop through Redis.
  decision.delay = requested_delay ? std::min(std::max(*requested_delay, policy.backoff.initial),
                                              policy.backoff.max)
                                   : ComputeBackoff(policy.backoff, attempts, unit_random);
  return decision;
}

}  // namespace

std::string_view Name(DeliveryOutcome outcome) {
  switch (outcome) {
    case DeliveryOutcome::kSuccess:
      return "success";
    case DeliveryOutcome::kRetry:
      return "retry";
    case DeliveryOutcome::kReject:
      return "reject";
    case DeliveryOutcome::kTimeout:
      return "timeout";
    case DeliveryOutcome::kError:
      return "error";
    case DeliveryOutcome::kNone:
      break;
  }
  return "";
}

std::string_view Name(DeadLetterReason reason) {
  switch (reason) {
    case DeadLetterReason::kMaxAttempts:
      return "max_attempts";
    case DeadLetterReason::kRejected:
      return "rejected";
    case DeadLetterReason::kDropped:
      return "dropped";
    case DeadLetterReason::kInvalid:
      return "invalid";
  }
  return "invalid";
}

std::optional<DeadLetterReason> DeadLetterReasonNamed(std::string_view name) {
  for (DeadLetterReason reason : kDeadLetterReasons) {
    if (Name(reason) == name) return reason;
  }
  return std::nullopt;
}

Decision Decision::Invalid(std::string why) {
  Decision decision;
  decision.action = Action::kDeadLetter;
  decision.reason = DeadLetterReason::kInvalid;
  decision.status_text = "none";
  decision.error = std::move(why);
  return decision;
}

Decision Decision::Accepted() {
  Decision decision;
  decision.action = Action::kAck;
  decision.outcome = DeliveryOutcome::kSuccess;
  return decision;
}

OutcomePolicy OutcomePolicyOf(const config::Subscription& subscription) {
  OutcomePolicy policy;
  policy.backoff.initial = subscription.retry.initial_backoff;
  policy.backoff.max = subscription.retry.max_backoff;
  policy.backoff.multiplier = subscription.retry.multiplier;
  policy.backoff.jitter = subscription.retry.jitter;
  policy.max_attempts = subscription.retry.max_attempts;
  policy.reject_statuses = subscription.handler.reject_statuses;
  policy.dapr_answers = subscription.handler.format == config::Format::kDapr;
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
      decision.outcome = DeliveryOutcome::kTimeout;
      decision.status_text = "timeout";
      decision.error = Clip(response.error);
      return RetryOrExhaust(policy, std::move(decision), attempts, std::nullopt, unit_random);
    case HandlerResponse::Kind::kError:
      decision.outcome = DeliveryOutcome::kError;
      decision.status_text = "error";
      decision.error = Clip(response.error);
      return RetryOrExhaust(policy, std::move(decision), attempts, std::nullopt, unit_random);
    case HandlerResponse::Kind::kAnswered:
      break;
  }
  decision.status_text = std::to_string(response.status);
  decision.error = Clip(response.body);
  if (response.status >= 200 && response.status < 300) {
    switch (policy.dapr_answers ? ParseDaprVerdict(response.body)
                                : ParseEntryVerdict(response.body)) {
      case BodyVerdict::kSuccess:
        decision.action = Action::kAck;
        decision.outcome = DeliveryOutcome::kSuccess;
        decision.error.clear();
        return decision;
      case BodyVerdict::kDrop:
        decision.action = Action::kDeadLetter;
        decision.reason = DeadLetterReason::kDropped;
        decision.outcome = DeliveryOutcome::kReject;
        return decision;
      case BodyVerdict::kRetry:
        decision.outcome = DeliveryOutcome::kRetry;
        break;
    }
  } else if (policy.dapr_answers && response.status == 404) {
    decision.action = Action::kDeadLetter;
    decision.reason = DeadLetterReason::kDropped;
    decision.outcome = DeliveryOutcome::kReject;
    return decision;
  } else if (std::find(policy.reject_statuses.begin(), policy.reject_statuses.end(),
                       response.status) != policy.reject_statuses.end()) {
    decision.action = Action::kDeadLetter;
    decision.reason = DeadLetterReason::kRejected;
    decision.outcome = DeliveryOutcome::kReject;
    return decision;
  } else {
    decision.outcome = DeliveryOutcome::kRetry;
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
    decision.reason = DeadLetterReason::kDropped;
    decision.outcome = DeliveryOutcome::kReject;
    return decision;
  }
  decision.outcome = DeliveryOutcome::kRetry;
  std::optional<Millis> requested;
  if (!retry_after.empty()) requested = ParseRetryAfter(retry_after, now_unix_ms);
  return RetryOrExhaust(policy, std::move(decision), attempts, requested, unit_random);
}

BatchDecision DecideBatch(const OutcomePolicy& policy, const HandlerResponse& response,
                          std::span<const BatchItem> items, int64_t now_unix_ms,
                          const std::function<double()>& unit_random) {
  BatchDecision result;
  result.decisions.reserve(items.size());
  const bool success_status = response.kind == HandlerResponse::Kind::kAnswered &&
                              response.status >= 200 && response.status < 300;
  if (!success_status) {
    // Anything but a 2xx applies SPEC 3.2 to every entry of the batch.
    for (const auto& item : items) {
      result.decisions.push_back(
          Decide(policy, response, item.attempts, now_unix_ms, unit_random()));
    }
    return result;
  }
  const BatchAnswer answer = ParseBatchAnswer(response.body);
  struct Named {
    const BatchFailure* failure;
    bool matched;
  };
  // A failure named twice: the last one counts (one entry, one outcome).
  std::unordered_map<std::string_view, Named> failures;
  for (const auto& failure : answer.failures) failures[failure.id] = {&failure, false};
  const std::string status_text = std::to_string(response.status);
  for (const auto& item : items) {
    auto it = failures.find(item.id);
    if (it == failures.end()) {
      result.decisions.push_back(Decision::Accepted());
      continue;
    }
    it->second.matched = true;
    const BatchFailure& failure = *it->second.failure;
    Decision decision =
        DecideBatchFailure(policy, failure.verdict == BodyVerdict::kDrop, failure.error,
                           item.attempts, response.retry_after, now_unix_ms, unit_random());
    decision.status_text = status_text;
    result.decisions.push_back(std::move(decision));
  }
  for (const auto& [id, named] : failures) {
    if (!named.matched) ++result.unknown_ids;
  }
  result.unknown_ids += static_cast<size_t>(answer.malformed);
  return result;
}

}  // namespace streamcar::delivery
