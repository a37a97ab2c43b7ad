#pragma once
// The commands of SPEC section 1. Each returns the process exit code and prints its own output;
// every non-zero exit prints one line saying what and where.

#include "sidecar/cli/args.h"

namespace streamcar::cli {

int Dispatch(const Arguments& args);

int RunCommand(const Arguments& args);
int CheckCommand(const Arguments& args);
int VersionCommand();
int StatusCommand(const Arguments& args);
int DlqListCommand(const Arguments& args);
int DlqReplayCommand(const Arguments& args);
int ProduceCommand(const Arguments& args);
int ReadCommand(const Arguments& args);
int TailCommand(const Arguments& args);
int RouteCommand(const Arguments& args);
int TrimCommand(const Arguments& args);

}  // namespace streamcar::cli
