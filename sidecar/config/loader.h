#pragma once
// Loading and printing the configuration file, driven by the key tables of fields.h (which, with
// this file's .cc, is the only code that includes yaml-cpp).

#include <string>
#include <string_view>

#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/config/expand.h"

namespace streamcar::config {

// Loads, expands, merges `defaults` into each subscription, fills defaults and validates.
// Errors are kInvalid with one line: "<file>:<line>: <key path>: <what is wrong>".
StatusOr<Config> LoadConfigFile(const std::string& path, const EnvLookup& env = ProcessEnv());
StatusOr<Config> LoadConfigText(std::string_view yaml, const std::string& source_name,
                                const EnvLookup& env = ProcessEnv());

// The effective configuration as YAML, as `streamcar check` prints it: every default filled in,
// variables expanded, the password (and any password in the URL) and the values of sensitive
// handler headers (IsSensitiveHeader) shown as "***".
std::string EmitEffectiveYaml(const Config& config);

}  // namespace streamcar::config
