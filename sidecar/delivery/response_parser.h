#pragma once
// Reading what the handler answered with a 2xx: {"status":"RETRY"|"DROP"} for one entry
// (SPEC 3.2) and {"failures":[...]} for a batch (SPEC 3.4). Pure functions over the body text.

#include <string>
#include <string_view>
#include <vector>

namespace streamcar::delivery {

enum class BodyVerdict { kSuccess, kRetry, kDrop };

// For one entry: RETRY or DROP (any case) in a top-level "status"; anything else is success. A
// UTF-8 byte-order mark before the object is skipped; an object naming "status" twice is a retry.
BodyVerdict ParseEntryVerdict(std::string_view body);

// For one entry, read as Dapr's runtime reads a subscriber's answer (format dapr, SPEC 11): a
// top-level "status" of SUCCESS (or empty) is success, RETRY a retry, DROP a drop, and any other
// text a retry (Dapr: "others: error, message to be retried"), in any case; a body that is not
// such an object (empty, not JSON, a status that is not a string) is success. An object naming
// "status" twice is a retry, as in ParseEntryVerdict.
BodyVerdict ParseDaprVerdict(std::string_view body);

struct BatchFailure {
  std::string id;
  BodyVerdict verdict = BodyVerdict::kRetry;
  std::string error;
};

struct BatchAnswer {
  bool has_failures = false;  // false: every entry succeeded
  std::vector<BatchFailure> failures;
  int malformed = 0;  // failure items we could not read (no id, unknown status): counted, skipped
};

// {"failures":[...]}, likewise after a byte-order mark; a failure item naming "status" twice is a
// retry.
BatchAnswer ParseBatchAnswer(std::string_view body);

}  // namespace streamcar::delivery
