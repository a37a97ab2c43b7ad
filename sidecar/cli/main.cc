// streamcar: a Kubernetes sidecar that delivers a Redis/Valkey stream consumer group to an HTTP
// handler. README.md is the tour; docs/ holds the reference.

#include <malloc.h>

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
    std::cerr << "streamcar: " << error << "\n";
    return 2;
  }
  if (parsed->command == streamcar::cli::CommandKind::kRun && parsed->help_text.empty()) {
    // From here on SIGTERM/SIGINT wait for the engine, which takes them synchronously: a signal
    // that arrives while the configuration is still loading becomes a graceful stop, not a kill.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    // Entry payloads and request bodies are allocated and freed by many threads. glibc raises its
    // mmap threshold after the first large free, so later large buffers come from per-thread
    // arenas that keep the memory after free: RSS then grows well past the bytes actually held
    // (handler.max_held_bytes). A fixed threshold (this also turns the raising off) gives every
    // buffer of 128 KiB or more back to the system when it is freed.
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  }
  return streamcar::cli::Dispatch(*parsed);
}
