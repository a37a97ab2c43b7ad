#include "sidecar/redis/topology/topology_routes.h"

namespace streamcar::redis {

bool TopologyRoutes::ByKeySlot() const {
  // Before the mode is known (Resolve not called yet) the key's slot is computed anyway: a
  // standalone or sentinel topology answers every slot with the same node.
  const auto mode = topology_->mode();
  return !mode.has_value() || *mode == ResolvedMode::kCluster;
}

}  // namespace streamcar::redis
