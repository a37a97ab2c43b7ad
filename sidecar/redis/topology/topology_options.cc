// The options of a Topology, from a validated configuration (SPEC 8).
#include <algorithm>

#include "sidecar/common/log.h"
#include "sidecar/redis/topology/node_options.h"
#include "sidecar/redis/topology/topology.h"

namespace streamcar::redis {

const char* ResolvedModeName(ResolvedMode mode) {
  switch (mode) {
    case ResolvedMode::kStandalone:
      return "standalone";
    case ResolvedMode::kCluster:
      return "cluster";
    case ResolvedMode::kSentinel:
      return "sentinel";
  }
  return "standalone";
}

TopologyOptions TopologyOptionsOf(const config::Config& config) {
  TopologyOptions options;
  options.mode = config.redis.mode;
  options.data = ConnectionOptionsOf(config);
  if (config.redis.endpoint.kind != config::RedisEndpoint::Kind::kUnix) {
    options.seeds.push_back(EndpointAddress(config.redis.endpoint));
  }
  for (const std::string& text : config.redis.nodes) {
    std::string error;
    auto node = keys::ParseNodeAddress(text, &error);
    if (!node) {
      // The loader validated redis.nodes; a bad one here is skipped, not fatal.
      LogWarn("ignoring a redis.nodes entry", {{"node", text}, {"error", error}});
      continue;
    }
    if (std::find(options.seeds.begin(), options.seeds.end(), *node) == options.seeds.end()) {
      options.seeds.push_back(std::move(*node));
    }
  }
  options.sentinel = config.redis.sentinel;
  return options;
}

}  // namespace streamcar::redis
