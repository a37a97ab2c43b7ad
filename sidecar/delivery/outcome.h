#pragma once
// The outcome policy of SPEC section 3.2 as pure code: what the handler answered, and how many
// times the entry was delivered, decide ack / retry after a delay / dead-letter / hold.

#include <string>
#include <vector>

#include "sidecar/common/backoff.h"
#include "sidecar/common/clock.h"
#include "sidecar/config/config.h"

namespace streamcar::delivery {

// What came back from one POST.
struct HandlerResponse {
  enum class Kind {
    kAnswered,  // an HTTP status arrived
    kRefused,   // could not connect: the handler is not listening (not an attempt)
    kTimeout,   // no answer within handler.timeout
    kError,     // reset or broken after the request was sent
  };
  Kind kind = Kind::kAnswered;
  int status = 0;
  std::string body;
  std::string retry_after;  // the Retry-After header, if any
  std::string error;        // transport error text for kRefused / kTimeout / kError
};

enum class Action { kAck, kRetry, kDeadLetter, kHold };

struct Decision {
  Action action = Action::kAck;
  Millis delay{0};          // kRetry: wait this long before the next delivery
  std::string reason;       // kDeadLetter: max_attempts | rejected | dropped | invalid
  std::string status_text;  // the HTTP status, "timeout" or "error" (for the dead letter)
  std::string error;        // first 1 KiB of the body, or the transport error
  const char* metric = "";  // streamcar_deliveries_total outcome; "" for kHold
};

struct OutcomePolicy {
  BackoffPolicy backoff;
  int max_attempts = 5;  // 0: retry forever
  std::vector<int> reject_statuses;
};

// The policy a subscription's retry and handler settings describe.
OutcomePolicy OutcomePolicyOf(const config::Subscription& subscription);

// `attempts` is the delivery count of the entry that was just delivered; `now_unix_ms` resolves
// an HTTP-date Retry-After; `unit_random` drives the jitter.
Decision Decide(const OutcomePolicy& policy, const HandlerResponse& response, int attempts,
                int64_t now_unix_ms, double unit_random);

// A failure the handler reported for one entry of a batch (SPEC 3.4), decided the same way:
// `retry_after` is the batch response's Retry-After header ("" if none), which replaces the
// backoff of a RETRY entry as in 3.2 (capped at max_backoff); `now_unix_ms` resolves a date.
Decision DecideBatchFailure(const OutcomePolicy& policy, bool drop, const std::string& error,
                            int attempts, const std::string& retry_after, int64_t now_unix_ms,
                            double unit_random);

// True when an entry claimed or re-read with this many deliveries must go to the dead-letter
// stream without another delivery (it crashed a consumer every time).
inline bool ExhaustedOnArrival(const OutcomePolicy& policy, int attempts) {
  return policy.max_attempts > 0 && attempts > policy.max_attempts;
}

}  // namespace streamcar::delivery
