#pragma once
// The dead-letter stream of a subscription that does not name one (SPEC 2 and 8), filled in by
// the loader: keys::DefaultDeadLetterStream names it, in a cluster or not. With `mode: auto`
// which of the two applies is known only once the server has answered, so the name is settled
// then.

#include <string>
#include <string_view>

#include "sidecar/config/config.h"

namespace streamcar::config {

// The loader's step, after reading: marks every subscription without a dead_letter.stream as
// defaulted and names its stream for `redis.mode` (auto: as standalone for now, with the cluster
// name kept in `stream_if_cluster` until SettleDeadLetterDefaults).
void FillDeadLetterDefaults(Config* config);

// Once `mode: auto` is resolved (at the start of `run` and of each CLI command): names every
// defaulted dead-letter stream for a cluster (`cluster`) or not. Explicit names are left alone.
// Idempotent; calling it for standalone/sentinel/cluster configurations changes nothing.
void SettleDeadLetterDefaults(Config& config, bool cluster);

}  // namespace streamcar::config
