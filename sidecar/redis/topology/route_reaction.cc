#include "sidecar/redis/topology/route_reaction.h"

namespace streamcar::redis {

RouteVerdict ReactTo(const ReplyView& reply, const keys::NodeAddress& answered) {
  RouteVerdict verdict;
  verdict.kind = Classify(reply, &verdict.redirect);
  switch (verdict.kind) {
    case ReplyKind::kMoved:
    case ReplyKind::kAsk:
      if (verdict.redirect.to.host.empty()) verdict.redirect.to.host = answered.host;
      verdict.reaction = verdict.kind == ReplyKind::kMoved ? RouteReaction::kFollowMoved
                                                           : RouteReaction::kFollowAsk;
      break;
    case ReplyKind::kTryAgain:
    case ReplyKind::kLoading:
      verdict.reaction = RouteReaction::kWait;
      break;
    case ReplyKind::kClusterDown:
    case ReplyKind::kMasterDown:
      verdict.reaction = RouteReaction::kNodeDown;
      break;
    case ReplyKind::kReadOnly:
      verdict.reaction = RouteReaction::kDemoted;
      break;
    case ReplyKind::kUnblocked:
      // A cluster's MIGRATE deletes the key on the source, releasing its readers: that is a
      // migration, and the next -MOVED or -ASK says where the key went.
      if (!IsUnblockedByKeyDeletion(reply)) verdict.reaction = RouteReaction::kReleased;
      break;
    case ReplyKind::kValue:
    case ReplyKind::kError:
    case ReplyKind::kNoScript:
    case ReplyKind::kCrossSlot:
      break;
  }
  return verdict;
}

bool UsableHost(const Redirect& redirect) { return redirect.to.host != "?"; }

}  // namespace streamcar::redis
