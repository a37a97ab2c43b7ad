#include "sidecar/runtime/tuning.h"

#include <cstdlib>

#include "sidecar/common/duration.h"

namespace streamcar::runtime {
namespace {

constexpr const char* kAckLingerVariable = "STREAMCAR_ACK_LINGER";
constexpr const char* kReadLingerVariable = "STREAMCAR_READ_LINGER";
constexpr const char* kConsumerLeaseVariable = "STREAMCAR_CONSUMER_LEASE";

// Unset or empty keeps `value`; anything else must be a duration within [0, kMaxLinger].
Status Override(const char* variable, const char* text, Millis* value) {
  if (text == nullptr || *text == '\0') return Status::Ok();
  std::string error;
  const std::optional<Millis> parsed = ParseDuration(text, &error);
  if (!parsed) {
    return Status(StatusCode::kInvalid, std::string(variable) + "=\"" + text + "\": " + error);
  }
  if (*parsed > Tuning::kMaxLinger) {
    return Status(StatusCode::kInvalid, std::string(variable) + "=\"" + text + "\": at most " +
                                            FormatDuration(Tuning::kMaxLinger));
  }
  *value = *parsed;
  return Status::Ok();
}

}  // namespace

StatusOr<Tuning> ParseTuning(const char* ack_linger, const char* read_linger) {
  Tuning tuning;
  if (Status s = Override(kAckLingerVariable, ack_linger, &tuning.ack_linger); !s.ok()) return s;
  if (Status s = Override(kReadLingerVariable, read_linger, &tuning.read_linger); !s.ok()) return s;
  return tuning;
}

Status ParseConsumerLease(const char* text, Millis* expiry) {
  if (text == nullptr || *text == '\0') return Status::Ok();
  std::string error;
  const std::optional<Millis> parsed = ParseDuration(text, &error);
  const std::string what = std::string(kConsumerLeaseVariable) + "=\"" + text + "\": ";
  if (!parsed) return Status(StatusCode::kInvalid, what + error);
  if (*parsed < Tuning::kMinConsumerLease || *parsed > Tuning::kMaxConsumerLease) {
    return Status(StatusCode::kInvalid, what + "must be from " +
                                            FormatDuration(Tuning::kMinConsumerLease) + " to " +
                                            FormatDuration(Tuning::kMaxConsumerLease));
  }
  *expiry = *parsed;
  return Status::Ok();
}

StatusOr<Tuning> TuningFromEnvironment() {
  auto tuning = ParseTuning(std::getenv(kAckLingerVariable), std::getenv(kReadLingerVariable));
  if (!tuning.ok()) return tuning;
  if (Status s = ParseConsumerLease(std::getenv(kConsumerLeaseVariable), &tuning->consumer_lease);
      !s.ok()) {
    return s;
  }
  return tuning;
}

}  // namespace streamcar::runtime
