#include "sidecar/sharding/shard_subscription.h"

#include <algorithm>
#include <cstdint>

#include "sidecar/keys/sharding_keys.h"

namespace streamcar::sharding {

config::Subscription ShardSubscription(const config::Subscription& sub, int shard) {
  config::Subscription of_shard = sub;
  of_shard.stream = keys::ShardKey(sub.ShardKeyPattern(), shard);
  of_shard.dead_letter.stream = keys::ShardDeadLetterKey(of_shard.stream);
  of_shard.dead_letter.stream_defaulted = false;
  // Format dapr's topic stays the stream the app declared in /dapr/subscribe, not the shard's.
  of_shard.handler.dapr_topic = sub.stream;
  // One request in flight per shard (B8), or one entry per key with ordering.key_field.
  if (sub.ordering.key_field.empty()) of_shard.handler.concurrency = 1;
  // The subscription's byte budget (SPEC 4.2) is shared by its shards: a member holding all of
  // them holds at most max_held_bytes, as a plain subscription does. A shard with nothing held
  // still takes one entry, however large.
  of_shard.handler.max_held_bytes = std::max<uint64_t>(
      1, sub.handler.max_held_bytes / static_cast<uint64_t>(sub.sharding.shards));
  // Its rate limit (SPEC 11) is not divided: the shard loops share one bucket of max_rps with
  // a burst of the subscription's concurrency, their member's (ShardedSubscription), so a
  // member holding some shards may use all of it and one holding all of them no more.
  return of_shard;
}

}  // namespace streamcar::sharding
