#pragma once
// What a routed Session asks about the deployment: where a slot's master is, and what it tells
// back after a redirect or a failed node. Topology answers it in production (topology_routes.h);
// a test may answer it with a deliberately stale map, to see the Session correct itself from the
// servers' redirects alone.

#include <string_view>

#include "sidecar/common/status.h"
#include "sidecar/keys/node_address.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/topology/reply_kind.h"

namespace streamcar::redis {

class NodeRoutes {
 public:
  virtual ~NodeRoutes() = default;
  // Whether commands are routed by their key's slot (cluster); otherwise every command goes to
  // MasterFor(-1) (standalone, sentinel).
  virtual bool ByKeySlot() const = 0;
  // The master for `slot` (-1: any master). May block (asks the servers).
  virtual StatusOr<keys::NodeAddress> MasterFor(int slot) = 0;
  virtual void OnMoved(const Redirect& redirect, const keys::NodeAddress& answered) = 0;
  virtual void OnAsk() = 0;
  virtual void OnNodeFailed(const keys::NodeAddress& node, std::string_view why) = 0;
  // How to connect to `node` (credentials, TLS, timeouts; database 0 in a cluster).
  virtual ConnectionOptions OptionsFor(const keys::NodeAddress& node) const = 0;
};

}  // namespace streamcar::redis
