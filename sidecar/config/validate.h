#pragma once
// Rules of SPEC section 2 that span several keys or need the whole file. Single-key rules
// (ranges, enums, units, URL forms) are the tables' (fields.cc), applied while loading, where the
// key's line is known.

#include <functional>
#include <string>

#include "sidecar/config/config.h"

namespace streamcar::config {

// Reports one problem: the key path and what is wrong. Returns nothing; the caller decides how to
// attach a file and line.
using ProblemSink = std::function<void(const std::string& path, const std::string& message)>;

// Checks the assembled configuration; calls `problem` for the first rule broken and stops.
void ValidateConfig(const Config& config, const ProblemSink& problem);

// SHARDING.md B1: why a sharded subscription's key_pattern cannot serve a cluster ("" when it
// can): each shard needs a slot of its own. ValidateConfig applies it with mode cluster; `run`
// once mode auto found a cluster.
std::string ClusterKeyPatternProblem(const Subscription& sub);

}  // namespace streamcar::config
