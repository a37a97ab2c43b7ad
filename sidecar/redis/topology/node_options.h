#pragma once
// The connection options for one node the topology discovered: the data options (scheme, TLS,
// credentials, timeouts) with that node's host and port, and short timeouts while discovering
// (a node that does not answer within a second is skipped for the next one).

#include "sidecar/keys/node_address.h"
#include "sidecar/redis/connection.h"

namespace streamcar::redis {

// `base` pointed at `node`: host and port replaced, the kind (TCP or TLS) kept, no topology.
ConnectionOptions PointedAt(const ConnectionOptions& base, const keys::NodeAddress& node);

// `options` with the timeouts of a discovery round trip: connect at most 1 s, commands at most
// 2 s, so that a dead candidate costs little and the background thread stops promptly.
ConnectionOptions ForDiscovery(ConnectionOptions options);

// The url's host and port as a node address (a unix socket: its path, port 0).
keys::NodeAddress EndpointAddress(const config::RedisEndpoint& endpoint);

}  // namespace streamcar::redis
