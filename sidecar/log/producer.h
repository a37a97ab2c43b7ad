#pragma once
// Appending to a stream with a receipt (SPEC section 10, POST .../entries and `produce`): the
// one place that builds the append, so the API and the CLI append the same way.

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/redis/script.h"
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
    kOutOfRange,    // `entry_id` is too far ahead of Redis's clock, or the maximum id: `id` ""
  };
  Kind kind = Kind::kAppended;
  std::string id;
};

class Producer {
 public:
  // `max_future_skew`: how far ahead of Redis's TIME an explicit id's ms part may be.
  Producer(config::LogStream stream, Millis idempotency_ttl,
           Millis max_future_skew = config::ApiConfig{}.max_future_skew);

  // At most this many entries in one AppendAll: each is a few Lua values, and the script holds
  // the whole batch's arguments at once.
  static constexpr size_t kMaxBatch = 1000;

  // Appends on the caller's session and thread. The idempotency decision and the append are one
  // atomic step in Redis, in the stream's slot. A `notify` stream PUBLISHes after the append
  // (at-most-once). kServerError WRONGTYPE etc. as Redis says; kIo/kTimeout when unreachable
  // (the append may or may not have happened: the idempotency key makes a retry safe).
  StatusOr<AppendResult> Append(redis::Session& session, const AppendRequest& request) const;

  // Appends `requests` in order in one round trip, one result per request.
  // Each entry is decided on its own (a duplicate or a refused id does not stop the others); all
  // must go to the same stream key (Target). kInvalid (nothing sent) when any request is malformed.
  // An error reply from Redis (WRONGTYPE) ends the batch: entries before it may have been appended,
  // and their idempotency keys make a retry of the whole batch safe.
  StatusOr<std::vector<AppendResult>> AppendAll(redis::Session& session,
                                                std::span<const AppendRequest> requests) const;

  // AppendAll in two halves, for a caller that sends the commands itself (append_group.h sends
  // them on the API's event loop): Prepare builds what goes to Redis (nothing when every entry is
  // decided without Redis), Finish reads Redis's replies to it, in order (an error reply is
  // kServerError with its message). Prepare refuses what AppendAll refuses, before anything is
  // sent.
  //
  // What goes is one script call, or, when no entry sent needs the script (no idempotency key,
  // no explicit id, no `notify`), one plain capped XADD per entry in one pipeline: Redis runs
  // each for a few µs less than the script's call of it, and the script would only do the same
  // XADD. An error reply ends the batch either way (below).
  struct Prepared {
    std::vector<redis::Command> commands;              // in order; empty: nothing to send
    bool plain = false;                                // one XADD per sent entry, not the script
    std::vector<std::optional<AppendResult>> decided;  // per request: decided without Redis
    size_t sent = 0;                                   // requests the commands carry
  };
  StatusOr<Prepared> Prepare(std::span<const AppendRequest> requests) const;
  static StatusOr<std::vector<AppendResult>> Finish(Prepared prepared,
                                                    std::span<const redis::Reply> replies);
  // The first `count` entries of a plain `prepared`, which Redis answered before it turned the
  // rest away (a slot that moved while the pipeline was on its way): Finish reads their replies.
  static Prepared PlainHead(size_t count);
  // The script the call runs: a connection that loads it up front saves a NOSCRIPT round trip.
  static const redis::Script& Script();

  // What AppendAll refuses an entry for before sending anything (kInvalid, naming the problem):
  // for callers that put entries of several clients into one call (append_group.h).
  Status Validate(const AppendRequest& request) const;

  // The stream key `request` is appended to: the stream, or for a sharded stream (SPEC 9) the
  // shard its entry key picks. kInvalid when a sharded stream's entry has no key.
  StatusOr<std::string> Target(const AppendRequest& request) const;

 private:
  config::LogStream stream_;
  Millis idempotency_ttl_;
  Millis max_future_skew_;
};

}  // namespace streamcar::log
