#pragma once
// `streamcar completion bash|zsh`: a shell completion script written from the command definitions
// (command_line.h), so it offers exactly the commands and options the parser takes.

#include <string>

#include "sidecar/cli/command_line.h"

namespace streamcar::cli {

// The script for `shell` ("bash" or "zsh"): source it, or install it where the shell looks.
std::string CompletionScript(const CommandLine& line, const std::string& shell);

}  // namespace streamcar::cli
