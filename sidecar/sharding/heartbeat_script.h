#pragma once
// The coordinator's one script (SHARDING.md B4): a member's heartbeat validates it, expires dead
// peers, recomputes the target assignment when the group changed, and grants or revokes this
// member's shards, in one atomic step on Redis. heartbeat.h builds its call and parses its reply.

#include "sidecar/redis/script.h"

namespace streamcar::sharding {

const redis::Script& HeartbeatScript();

}  // namespace streamcar::sharding
