#pragma once
// `streamcar man`: streamcar(1) written from the command definitions (command_line.h), the same
// ones --help and the completion scripts come from. The image and the release install it.

#include <string>

#include "sidecar/cli/command_line.h"

namespace streamcar::cli {

// The man page in roff (man(7) macros), dated by the build date (reproducible builds).
std::string ManPage(const CommandLine& line);

}  // namespace streamcar::cli
