#include "sidecar/sharding/shard_subscription.h"

#include "sidecar/sharding/sharding_keys.h"

namespace streamcar::sharding {

config::Subscription ShardSubscription(const config::Subscription& sub, int shard) {
  config::Subscription of_shard = sub;
  of_shard.stream = ShardKey(sub.ShardKeyPattern(), shard);
  of_shard.dead_letter.stream = ShardDeadLetterKey(of_shard.stream);
  of_shard.dead_letter.stream_defaulted = false;
  // One entry in flight per shard (B8), or one per key with ordering.key_field.
  if (sub.ordering.key_field.empty()) of_shard.handler.concurrency = 1;
  return of_shard;
}

}  // namespace streamcar::sharding
