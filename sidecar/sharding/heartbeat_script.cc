#include "sidecar/sharding/heartbeat_script.h"

#include "sidecar/sharding/lua/heartbeat.lua.h"

namespace streamcar::sharding {
namespace {

// The coordinator of a sharded subscription (SHARDING.md B4): membership, the target assignment
// and the grants of one (logical stream, group), all in one atomic step per heartbeat. The clock
// is Redis `TIME`; no member's clock is read. Shard lists travel as "3,5,9" strings, in the
// arguments and inside the member records alike, so that an empty list is never an ambiguous
// empty JSON table. The script is sharding/lua/heartbeat.lua.
const redis::Script kHeartbeatScript(lua::kHeartbeat);

}  // namespace

const redis::Script& HeartbeatScript() { return kHeartbeatScript; }

}  // namespace streamcar::sharding
