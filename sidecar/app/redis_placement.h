#pragma once
// Where each key lives (SPEC 8), settled once at start-up before anything connects: the
// deployment's topology (none for a standalone server), the connection options every part of the
// process then uses, and which subscriptions' dead letters take the two-step path in a cluster.

#include <atomic>
#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/admin/metrics.h"
#include "sidecar/config/config.h"
#include "sidecar/redis/topology/topology.h"

namespace streamcar::app {

struct RedisPlacement {
  // Null: every connection goes to the url, as always (an explicit standalone, or a server that
  // `auto` finds standalone).
  std::shared_ptr<redis::Topology> topology;
  // The topology once it is started, for the readiness check of the admin server, which answers
  // from before the topology is known.
  std::atomic<redis::Topology*> ready_topology{nullptr};
  // The options of every Redis connection: the url's, with the topology when there is one.
  redis::ConnectionOptions options;
  // By subscription index: its dead letters take the two-step path (a cluster, where its
  // dead-letter stream is in another slot than its stream).
  std::vector<bool> two_step_dead_letters;
};

// Learns where each key lives (SPEC 8): resolves the topology, retrying with backoff while Redis
// cannot be reached (a SIGTERM or SIGINT among `signals` ends the wait), settles the default
// dead-letter streams for `redis.mode auto` in *config, and in a cluster checks every
// subscription's slots. Fills *placement from `url_options`. Returns the exit code to leave with
// (after logging why), or nullopt once placed.
std::optional<int> PlaceRedis(config::Config& config, const redis::ConnectionOptions& url_options,
                              const sigset_t& signals, admin::Metrics& metrics,
                              RedisPlacement& placement);

// SPEC 8: not ready while no master is known for a subscribed stream ("" when every one has one,
// or without a topology).
std::string NoMasterFor(const config::Config& config, const redis::Topology* topology);

}  // namespace streamcar::app
