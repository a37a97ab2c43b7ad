#pragma once
// One shard of a sharded subscription as a subscription of its own (SPEC 9, SHARDING.md B2, B8):
// its stream is the shard's key, its dead letters go to the shard's own `<shard key>:dlq` (the
// same slot, so the dead letter and the ack stay one step), without ordering.key_field one
// request is in flight at a time, and its byte budget is the subscription's over the shard count.
// The member runs a loop on it; `dlq` reads and replays it.

#include "sidecar/config/config.h"

namespace streamcar::sharding {

config::Subscription ShardSubscription(const config::Subscription& sub, int shard);

}  // namespace streamcar::sharding
