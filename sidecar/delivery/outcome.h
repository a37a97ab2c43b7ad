#pragma once
// The outcome policy of SPEC section 3.2 as pure code: what the handler answered, and how many
// times the entry was delivered, decide ack / retry after a delay / dead-letter / hold.

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
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

// The outcome label of streamcar_deliveries_total (SPEC 5). kNone: not a delivery (the handler
// refused the connection, or the entry was never sent); it has no series and its Name is "".
enum class DeliveryOutcome { kSuccess, kRetry, kReject, kTimeout, kError, kNone };
// Every outcome that has a series, in label order.
inline constexpr std::array<DeliveryOutcome, 5> kDeliveryOutcomes = {
    DeliveryOutcome::kSuccess, DeliveryOutcome::kRetry, DeliveryOutcome::kReject,
    DeliveryOutcome::kTimeout, DeliveryOutcome::kError};
std::string_view Name(DeliveryOutcome outcome);

// Why an entry went to the dead-letter stream: the reason label of
// streamcar_dead_lettered_total and the streamcar.reason field of the record (SPEC 3.3).
enum class DeadLetterReason { kMaxAttempts, kRejected, kDropped, kInvalid };
inline constexpr std::array<DeadLetterReason, 4> kDeadLetterReasons = {
    DeadLetterReason::kMaxAttempts, DeadLetterReason::kRejected, DeadLetterReason::kDropped,
    DeadLetterReason::kInvalid};
std::string_view Name(DeadLetterReason reason);
// The reason a record's streamcar.reason names; nullopt for any other text.
std::optional<DeadLetterReason> DeadLetterReasonNamed(std::string_view name);

struct Decision {
  Action action = Action::kAck;
  Millis delay{0};  // kRetry: wait this long before the next delivery
  DeadLetterReason reason = DeadLetterReason::kMaxAttempts;  // read for kDeadLetter only
  std::string status_text;  // the HTTP status, "timeout", "error" or "none" (for the dead letter)
  std::string error;        // first 1 KiB of the body, or the transport error
  DeliveryOutcome outcome = DeliveryOutcome::kNone;  // counted in streamcar_deliveries_total

  // The dead letter of an entry the encoder refuses (nothing was sent, so no delivery is
  // counted): reason invalid, status "none", `why` as the error.
  static Decision Invalid(std::string why);
  // A 2xx for this entry (a single entry's success, or a batch item the answer did not fail).
  static Decision Accepted();
};

struct OutcomePolicy {
  BackoffPolicy backoff;
  int max_attempts = 5;  // 0: retry forever
  std::vector<int> reject_statuses;
  // format dapr (SPEC 11): a 2xx body is read as Dapr's runtime reads it (ParseDaprVerdict), and
  // a 404 dead-letters the entry as dropped, as Dapr drops it.
  bool dapr_answers = false;
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

// One entry of a batch as DecideBatch needs it; `id` must outlive the call.
struct BatchItem {
  std::string_view id;
  int attempts = 1;  // the delivery count of the delivery just made
};

struct BatchDecision {
  std::vector<Decision> decisions;  // one per item, in the items' order
  size_t unknown_ids = 0;  // failures naming no item of the batch + failure items not readable
};

// The answer to a batch POST (SPEC 3.4), entry by entry. Anything but a 2xx applies Decide to
// every item. A 2xx reads {"failures":[...]}: an item named there is decided by
// DecideBatchFailure (status_text = the batch's status), every other item is Accepted. Failures
// naming ids that are not in the batch, and failure items that cannot be read, are counted in
// `unknown_ids` and otherwise ignored. `unit_random` (the jitter) is drawn once per item that
// Decide or DecideBatchFailure decides. A refused connection is no delivery: every item is kHold
// (outcome kNone), and the caller hands the entries back without spending an attempt.
BatchDecision DecideBatch(const OutcomePolicy& policy, const HandlerResponse& response,
                          std::span<const BatchItem> items, int64_t now_unix_ms,
                          const std::function<double()>& unit_random);

// True when an entry claimed or re-read with this many deliveries must go to the dead-letter
// stream without another delivery (it crashed a consumer every time).
inline bool ExhaustedOnArrival(const OutcomePolicy& policy, int attempts) {
  return policy.max_attempts > 0 && attempts > policy.max_attempts;
}

}  // namespace streamcar::delivery
