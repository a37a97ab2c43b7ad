#pragma once
// What the one-shot commands (status, dlq) share: loading the config, one Redis connection, and
// finding a subscription by name. Failures print one line and give the exit code.

#include <memory>
#include <optional>
#include <string>

#include "sidecar/cli/args.h"
#include "sidecar/config/config.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/session.h"
#include "sidecar/redis/topology/topology.h"

namespace streamcar::cli {

// Loads the config and applies its log.level; on failure prints the error and sets *exit_code
// to 2.
std::optional<config::Config> LoadOrReport(const Arguments& args, int* exit_code);

// Connects once (connect_timeout); on failure prints the error and sets *exit_code to 1.
std::unique_ptr<redis::Connection> ConnectOrReport(const config::Config& config, int* exit_code);

// Redis for a one-shot command in any mode (SPEC 8): standalone exactly as before (the url's
// node, one plain session); cluster and sentinel through a Topology resolved within the connect
// timeout and a session that routes each command by its key.
struct CliRedis {
  redis::RedisHealth health;
  std::shared_ptr<redis::Topology> topology;  // null when standalone
  std::unique_ptr<redis::Session> session;
  redis::ResolvedMode mode = redis::ResolvedMode::kStandalone;
  int masters = 1;  // masters known (cluster: in the slot map)
};

// Connects in the configured mode; on failure prints the error and sets *exit_code to 1. With
// `redis.mode: auto` on a cluster, the default dead-letter streams are settled to their
// same-slot names (SPEC 8) in *config.
std::unique_ptr<CliRedis> RedisOrReport(config::Config* config, int* exit_code);

// The subscription named `name` (its name, or "<stream>/<group>"); prints the known names and
// sets *exit_code to 2 when there is none.
const config::Subscription* FindSubscriptionOrReport(const config::Config& config,
                                                     const std::string& name, int* exit_code);

// "3m12s ago"-style age of an entry id relative to now, for people.
std::string AgeOf(int64_t age_ms);

}  // namespace streamcar::cli
