#pragma once
// The fenced data-plane script of a shard (SHARDING.md B5): install a fence token, then read,
// claim, acknowledge, retry, keep alive and dead-letter only while that token is the installed
// one. fenced_ops.h builds its calls and parses its replies.

#include "sidecar/redis/script.h"

namespace streamcar::sharding {

const redis::Script& FencedScript();

}  // namespace streamcar::sharding
