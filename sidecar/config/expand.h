#pragma once
// ${VAR} and ${VAR:-default} expansion of configuration scalars (SPEC section 2). "$$" stands for
// a literal "$", so "$${VAR}" keeps "${VAR}" as text.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace streamcar::config {

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment.
EnvLookup ProcessEnv();

// Returns the expanded text, or nullopt with *error naming the variable that is unset (without a
// default) or the malformed reference.
std::optional<std::string> ExpandVariables(std::string_view text, const EnvLookup& env,
                                           std::string* error);

}  // namespace streamcar::config
