#pragma once
// Appending to a stream with a receipt (SPEC section 10, POST .../entries and `produce`): the
// one place that builds the append, so the API and the CLI append the same way.

#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/redis/session.h"

namespace streamcar::log {

struct AppendRequest {
  std::vector<std::pair<std::string, std::string>> fields;  // in order; at least one
  std::string idempotency_key;                              // "": none
  std::string entry_id;   // "": Redis mints it ("*"); else "<ms>-<seq>" exactly
  std::string shard_key;  // Streamcar-Key (sharded streams, SPEC 9); "": none
};

struct AppendResult {
  enum class Kind {
    kAppended,      // a new entry: `id` is its receipt
    kDuplicate,     // the idempotency key was seen within the TTL: `id` is the first append's
    kNonMonotonic,  // `entry_id` is not above the stream's top: `id` is the top
  };
  Kind kind = Kind::kAppended;
  std::string id;
};

class Producer {
 public:
  Producer(config::LogStream stream, Millis idempotency_ttl);

  // Appends on the caller's session and thread. The idempotency decision and the append are one
  // atomic step in Redis, in the stream's slot. A `notify` stream PUBLISHes after the append
  // (at-most-once). kServerError WRONGTYPE etc. as Redis says; kIo/kTimeout when unreachable
  // (the append may or may not have happened: the idempotency key makes a retry safe).
  StatusOr<AppendResult> Append(redis::Session& session, const AppendRequest& request) const;

 private:
  config::LogStream stream_;
  Millis idempotency_ttl_;
};

}  // namespace streamcar::log
