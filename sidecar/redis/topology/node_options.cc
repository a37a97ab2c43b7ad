#include "sidecar/redis/topology/node_options.h"

#include <algorithm>

namespace streamcar::redis {

ConnectionOptions PointedAt(const ConnectionOptions& base, const keys::NodeAddress& node) {
  ConnectionOptions options = base;
  options.topology.reset();
  options.slot = -1;
  if (options.endpoint.kind == config::RedisEndpoint::Kind::kUnix) {
    // A unix socket has no host and port to replace: the node is the socket itself.
    return options;
  }
  options.endpoint.host = node.host;
  options.endpoint.port = node.port;
  return options;
}

ConnectionOptions ForDiscovery(ConnectionOptions options) {
  options.connect_timeout = std::min(options.connect_timeout, Millis(1000));
  options.command_timeout = std::min(options.command_timeout, Millis(2000));
  return options;
}

keys::NodeAddress EndpointAddress(const config::RedisEndpoint& endpoint) {
  if (endpoint.kind == config::RedisEndpoint::Kind::kUnix)
    return keys::NodeAddress{endpoint.path, 0};
  return keys::NodeAddress{endpoint.host, endpoint.port};
}

}  // namespace streamcar::redis
