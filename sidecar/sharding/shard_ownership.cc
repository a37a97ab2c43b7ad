#include "sidecar/sharding/shard_ownership.h"

#include <utility>

#include "sidecar/common/log.h"
#include "sidecar/sharding/fenced_intake.h"
#include "sidecar/sharding/fenced_ops.h"

namespace streamcar::sharding {

ShardOwnership::ShardOwnership(Grant grant, Callbacks callbacks)
    : grant_(std::move(grant)), callbacks_(std::move(callbacks)) {}

std::unique_ptr<redis::SubscriptionOps> ShardOwnership::MakeOps(const config::Subscription& sub,
                                                                const std::string& consumer) const {
  return std::make_unique<FencedShardOps>(sub.stream, sub.group, consumer, grant_.token,
                                          grant_.member_id, grant_.member_epoch);
}

std::unique_ptr<runtime::EntrySource> ShardOwnership::MakeSource(runtime::SourceParts parts) const {
  // MakeOps above made them: the loop hands back what its ownership made.
  const auto& fenced = static_cast<const FencedShardOps&>(parts.ops);
  // The end of the start-up drain is the end of the takeover.
  parts.callbacks.drained = [drained = std::move(parts.callbacks.drained),
                             takeover_done = callbacks_.takeover_done] {
    if (drained) drained();
    if (takeover_done) takeover_done();
  };
  // Said where it is known which shard and which token: the loop only hears "refused".
  parts.callbacks.refused = [refused = std::move(parts.callbacks.refused), name = parts.sub.name,
                             shard = parts.sub.stream,
                             token = grant_.token](int64_t installed, std::string_view op) {
    LogWarn("shard fenced: a newer owner holds it",
            {{"subscription", name}, {"shard", shard}, {"token", token}, {"installed", installed}});
    if (refused) refused(installed, op);
  };
  return std::make_unique<FencedIntake>(parts, fenced);
}

std::string ShardOwnership::LoopNameSuffix() const {
  return "/shard-" + std::to_string(grant_.shard);
}

std::optional<delivery::ShardStamp> ShardOwnership::RequestStamp() const {
  return delivery::ShardStamp{grant_.shard, grant_.token};
}

void ShardOwnership::Lost(int64_t installed, std::string_view op) const {
  if (callbacks_.fenced) callbacks_.fenced(installed, op);
}

}  // namespace streamcar::sharding
