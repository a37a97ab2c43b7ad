#pragma once
// `streamcar run`: composes the subscriptions, the admin server and the signal handling, and
// orders the shutdown of SPEC 4.5: readiness off, no new reads, in-flight requests finish (up to
// shutdown.drain_timeout), their outcomes are settled, exit 0. A fatal error (WRONGTYPE, refused
// credentials) ends the process with exit 1 after the same settling.

#include "sidecar/config/config.h"
#include "sidecar/runtime/tuning.h"

namespace streamcar::app {

// Runs until SIGTERM/SIGINT or a fatal error; returns the process exit code.
int Run(const config::Config& config, const runtime::Tuning& tuning);

}  // namespace streamcar::app
