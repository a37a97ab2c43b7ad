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

  // Appends `requests` in order in one script call (one round trip), one result per request.
  // Each entry is decided on its own (a duplicate or a refused id does not stop the others); all
  // must go to the same stream key (Target). kInvalid (nothing sent) when any request is malformed.
  // An error reply from Redis (WRONGTYPE) ends the batch: entries before it may have been appended,
  // and their idempotency keys make a retry of the whole batch safe.
  StatusOr<std::vector<AppendResult>> AppendAll(redis::Session& session,
                                                std::span<const AppendRequest> requests) const;

  // AppendAll in two halves, for a caller that sends the commands itself (append_group.h sends
  // them on the API's event loop): Prepare builds what goes to Redis (nothing when every entry is
  // decided without Redis), and Finish reads Redis's reply to a script call (an error reply is
  // kServerError with its message), PlainResult each reply of kPlain XADDs. Prepare refuses what
  // AppendAll refuses, before anything is sent.
  //
  // When no entry needs the script (no idempotency key, no explicit id, no `notify`), the
  // entries go as plain capped XADDs, which Redis runs for a few µs less each than the script's
  // call of them: kIndependent entries (concurrent single appends that only share a round trip,
  // each decided on its own) as one XADD each in a pipeline, a kBatch (AppendAll: a batch append,
  // `produce`) between MULTI and EXEC, so that it lands as one atomic step, contiguous and in
  // order, or not at all. Any other entries go as one script call, and so does a kScript batch
  // whatever it holds (a batch that Redis Cluster turned away as a transaction).
  enum class Grouping { kBatch, kIndependent, kScript };
  enum class Form { kScript, kPlain, kTransaction };
  struct Prepared {
    std::vector<redis::Command> commands;  // in order; empty: nothing to send
    Form form = Form::kScript;
    std::vector<std::optional<AppendResult>> decided;  // per request: decided without Redis
    size_t sent = 0;                                   // requests the commands carry
  };
  StatusOr<Prepared> Prepare(std::span<const AppendRequest> requests,
                             Grouping grouping = Grouping::kBatch) const;
  static StatusOr<std::vector<AppendResult>> Finish(Prepared prepared, const redis::Reply& reply);
  // The replies to a kTransaction's MULTI, XADDs and EXEC: every receipt, or why none was given
  // (a redirected XADD is kIo: it ran nowhere, and a retry is safe).
  static StatusOr<std::vector<AppendResult>> FinishTransaction(
      const Prepared& prepared, std::span<const redis::Reply> replies);
  // True for a reply that says the command ran nowhere and may go again where Redis points
  // (MOVED, ASK, TRYAGAIN, CLUSTERDOWN ...).
  static bool Redirected(const redis::Reply& reply);
  // What one plain XADD's reply says of its entry: appended with its id, or Redis's error.
  static StatusOr<AppendResult> PlainResult(const redis::ReplyView& reply);
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
