#include "sidecar/redis/topology/route_attempt.h"

#include <algorithm>
#include <utility>

namespace streamcar::redis {

RouteAttempt::RouteAttempt(int slot, keys::NodeAddress target, SteadyTime deadline,
                           RouteLimits limits)
    : slot_(slot),
      target_(target),
      home_(std::move(target)),
      deadline_(deadline),
      limits_(limits) {}

RouteAttempt::Next RouteAttempt::OnReply(const ReplyView& reply, SteadyTime now) {
  const keys::NodeAddress answered =
      std::exchange(target_, home_);  // an ASK holds for one send only
  const RouteVerdict verdict = ReactTo(reply, answered);
  last_kind_ = verdict.kind;
  switch (verdict.reaction) {
    case RouteReaction::kFollowMoved:
    case RouteReaction::kFollowAsk:
      return Redirected(verdict);
    case RouteReaction::kWait:
      // TRYAGAIN, during a migration: a multi-key command whose keys are split between the two
      // nodes. Retried where the map says (the source ASKs again once the keys have moved).
      return Backoff(
          Next::kRetryAfter, now,
          verdict.kind == ReplyKind::kTryAgain ? "TRYAGAIN" : ReplyKindName(verdict.kind));
    case RouteReaction::kNodeDown:
      return Backoff(Next::kRetryAfter, now, ReplyKindName(verdict.kind));
    case RouteReaction::kDemoted:
      // The node is a replica now (a failover): the write was not applied; ask the map again.
      return Backoff(Next::kRefreshAndRetry, now, "READONLY");
    case RouteReaction::kReleased:
      // A released blocking command is answered as it is: its caller reads again, and that
      // read is routed through the map.
    case RouteReaction::kNone:
      return Next::kDone;
  }
  return Next::kDone;
}

bool RouteAttempt::Reroutes(const ReplyView& reply) {
  switch (ReactTo(reply, keys::NodeAddress()).reaction) {
    case RouteReaction::kFollowMoved:
    case RouteReaction::kFollowAsk:
    case RouteReaction::kWait:
    case RouteReaction::kNodeDown:
    case RouteReaction::kDemoted:
      return true;
    case RouteReaction::kReleased:
    case RouteReaction::kNone:
      return false;
  }
  return false;
}

RouteAttempt::Next RouteAttempt::Redirected(const RouteVerdict& verdict) {
  if (++redirects_ > limits_.max_redirects) {
    return Fail("more than " + std::to_string(limits_.max_redirects) + " redirects for slot " +
                std::to_string(slot_) + " (last to " + verdict.redirect.to.Describe() + ")");
  }
  redirect_ = verdict.redirect;
  if (!UsableHost(redirect_)) {
    retry_after_ = Millis(0);
    return Next::kRefreshAndRetry;
  }
  target_ = redirect_.to;
  if (verdict.reaction == RouteReaction::kFollowAsk) return Next::kSendAskingTo;
  home_ = redirect_.to;
  return Next::kSendTo;
}

RouteAttempt::Next RouteAttempt::Backoff(Next next, SteadyTime now, std::string_view why) {
  // 20, 40, 80 ... ms, capped: short blips (a MIGRATE batch) stay invisible to the caller.
  Millis delay = limits_.backoff_first;
  for (int i = 0; i < retries_ && delay < limits_.backoff_cap; ++i) delay *= 2;
  delay = std::min(delay, limits_.backoff_cap);
  if (now + delay >= deadline_) {
    return Fail(std::string(why) + " on slot " + std::to_string(slot_) + " until the deadline (" +
                std::to_string(retries_) + " retries)");
  }
  ++retries_;
  retry_after_ = delay;
  return next;
}

RouteAttempt::Next RouteAttempt::OnConnectionLost(bool sent, SteadyTime now) {
  const keys::NodeAddress lost = std::exchange(target_, home_);
  if (sent) {
    maybe_applied_ = true;
    return Fail("the connection to " + lost.Describe() + " failed after the command was sent");
  }
  return Backoff(Next::kRefreshAndRetry, now, "connection lost");
}

void RouteAttempt::Retarget(keys::NodeAddress target) {
  target_ = target;
  home_ = std::move(target);
}

RouteAttempt::Next RouteAttempt::Fail(std::string why) {
  failure_ = std::move(why);
  return Next::kFail;
}

}  // namespace streamcar::redis
