// streamcar: a Kubernetes sidecar that delivers a Redis/Valkey stream consumer group to an HTTP
// handler. See SPEC.md for the contract and README.md for the tour.

#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "sidecar/cli/args.h"
#include "sidecar/cli/commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string error;
  auto parsed = streamcar::cli::ParseArguments(args, &error);
  if (!parsed) {
    std::cerr << "streamcar: " << error << " (see streamcar --help)\n";
    return 2;
  }
  if (parsed->command == streamcar::cli::CommandKind::kRun && !parsed->help) {
    // From here on SIGTERM/SIGINT wait for the engine, which takes them synchronously: a signal
    // that arrives while the configuration is still loading becomes a graceful stop, not a kill.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  }
  return streamcar::cli::Dispatch(*parsed);
}
