#pragma once
// Reads a Redis Cluster's slot map from the first candidate node that gives one serving every
// used slot: CLUSTER SHARDS, and CLUSTER SLOTS on the same node when SHARDS is unknown (Redis
// before 7.0) or its map does not serve the used slots (a failed master listed with no slots,
// redis/redis#13414). Blocking; called by the topology, never on an event loop.

#include <functional>
#include <span>
#include <vector>

#include "sidecar/common/status.h"
#include "sidecar/keys/node_address.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/topology/slot_map.h"

namespace streamcar::redis {

struct ClusterMapRead {
  SlotMap map;
  keys::NodeAddress from;  // the node that gave it
};

// Asks `candidates` in order (each once), connecting with `options_for(node)`. `cancelled` is
// checked between candidates. The error of the last candidate when none gives a usable map;
// kFatal when every candidate refused our credentials (retrying cannot help).
StatusOr<ClusterMapRead> ReadClusterMap(
    const std::vector<keys::NodeAddress>& candidates,
    const std::function<ConnectionOptions(const keys::NodeAddress&)>& options_for,
    std::span<const int> used_slots, const std::function<bool()>& cancelled);

// One node's map over an open connection: SHARDS, else SLOTS (see above).
StatusOr<SlotMap> ReadMapFrom(Connection& connection, const keys::NodeAddress& node, bool tls,
                              std::span<const int> used_slots);

}  // namespace streamcar::redis
