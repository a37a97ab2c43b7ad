#pragma once
// The journey of one command through a cluster (or to a sentinel-discovered master): where to
// send it next after each reply, until it has an answer, or the redirects or the time run out.
// Pure logic, for the blocking driver (Session): it feeds replies and acts on Next. What a reply
// means for the route is route_reaction.h's, which the event-loop driver (AsyncConnection) reads
// too.

#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/keys/node_address.h"
#include "sidecar/redis/reply.h"
#include "sidecar/redis/topology/reply_kind.h"
#include "sidecar/redis/topology/route_reaction.h"

namespace streamcar::redis {

struct RouteLimits {
  int max_redirects = 5;  // MOVED and ASK together; one more fails the command
  Millis backoff_first{20};
  Millis backoff_cap{500};
};

class RouteAttempt {
 public:
  // `target`: the node the map names for `slot` (the first send goes there); `deadline`: the
  // command timeout from the first send, after which transient errors are the caller's.
  RouteAttempt(int slot, keys::NodeAddress target, SteadyTime deadline, RouteLimits limits = {});

  enum class Next {
    kDone,             // the reply is the command's answer (a value or its own error)
    kSendTo,           // -MOVED: send again to target() (tell the topology: redirect())
    kSendAskingTo,     // -ASK: send ASKING then the command to target(), this once
    kRetryAfter,       // a transient state: send again to target() after retry_after()
    kRefreshAndRetry,  // the node cannot serve it: refresh the map, wait retry_after(), resend
                       // to the slot's master then (Retarget)
    kFail,             // give up: failure() says why; the last reply is the caller's answer
  };

  Next OnReply(const ReplyView& reply, SteadyTime now);
  // Whether OnReply would route on `reply` rather than take it as the command's answer.
  static bool Reroutes(const ReplyView& reply);
  // The connection to target() failed. `sent`: the command may have reached the node, so it may
  // have been applied: kFail with maybe_applied() (SPEC 4.3 ambiguous; the caller decides). Not
  // sent: kRefreshAndRetry until the deadline.
  Next OnConnectionLost(bool sent, SteadyTime now);
  // After kRefreshAndRetry: the map's node for the slot now.
  void Retarget(keys::NodeAddress target);

  int slot() const { return slot_; }
  const keys::NodeAddress& target() const { return target_; }
  Millis retry_after() const { return retry_after_; }
  int redirects() const { return redirects_; }
  int retries() const { return retries_; }
  // The last MOVED or ASK followed (after kSendTo: what to tell the topology).
  const Redirect& redirect() const { return redirect_; }
  // The kind of the last reply (for metrics: retries by reason).
  ReplyKind last_kind() const { return last_kind_; }
  bool maybe_applied() const { return maybe_applied_; }
  const std::string& failure() const { return failure_; }

 private:
  Next Redirected(const RouteVerdict& verdict);
  Next Backoff(Next next, SteadyTime now, std::string_view why);
  Next Fail(std::string why);

  int slot_;
  keys::NodeAddress target_;
  keys::NodeAddress home_;  // where the map sends the slot; target_ differs only for an ASK
  SteadyTime deadline_;
  RouteLimits limits_;
  Millis retry_after_{0};
  int redirects_ = 0;
  int retries_ = 0;
  Redirect redirect_;
  ReplyKind last_kind_ = ReplyKind::kValue;
  bool maybe_applied_ = false;
  std::string failure_;
};

}  // namespace streamcar::redis
