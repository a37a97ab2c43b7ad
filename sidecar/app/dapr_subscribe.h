#pragma once
// Dapr's programmatic subscription at start (SPEC 11): when a subscription has format dapr and a
// handler url without a path, the app is asked GET /dapr/subscribe until it answers, and its
// routes and dead-letter topics are written into the configuration before anything is built.
// /readyz stays not ready meanwhile (no group is ensured yet).

#include <csignal>
#include <optional>

#include "sidecar/config/config.h"

namespace streamcar::app {

// Nothing to do (nullopt) when no subscription wants a route. Otherwise asks the app, retrying
// with backoff while it is not up or answers anything but 2xx other than 404 (one log line per
// try), and applies the answer to config->subscriptions. Returns the exit code to leave with: 0
// for SIGTERM or SIGINT while waiting, 2 when the answer cannot be used (the reason logged:
// a topic the app does not declare, a CEL match rule, ...); nullopt once applied.
std::optional<int> ResolveDaprRoutes(config::Config* config, const sigset_t& signals);

}  // namespace streamcar::app
