#pragma once
// What the one-shot commands (status, dlq) share: loading the config, one Redis connection, and
// finding a subscription by name. Failures print one line and give the exit code.

#include <memory>
#include <optional>
#include <string>

#include "sidecar/cli/args.h"
#include "sidecar/config/config.h"
#include "sidecar/redis/connection.h"

namespace streamcar::cli {

// Loads the config; on failure prints the error and sets *exit_code to 2.
std::optional<config::Config> LoadOrReport(const Arguments& args, int* exit_code);

// Connects once (connect_timeout); on failure prints the error and sets *exit_code to 1.
std::unique_ptr<redis::Connection> ConnectOrReport(const config::Config& config, int* exit_code);

// The subscription named `name` (its name, or "<stream>/<group>"); prints the known names and
// sets *exit_code to 2 when there is none.
const config::Subscription* FindSubscriptionOrReport(const config::Config& config,
                                                     const std::string& name, int* exit_code);

// "3m12s ago"-style age of an entry id relative to now, for people.
std::string AgeOf(int64_t age_ms);

}  // namespace streamcar::cli
