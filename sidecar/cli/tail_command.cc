// `streamcar tail` (SPEC 1 and 10): follows a stream through the same FollowHub the API's SSE
// uses, until SIGINT or SIGTERM (exit 0).

#include <csignal>
#include <ctime>
#include <iostream>

#include "sidecar/cli/cli_support.h"
#include "sidecar/cli/commands.h"
#include "sidecar/cli/log_cli_support.h"
#include "sidecar/delivery/encoder.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/log/follow_hub.h"

namespace streamcar::cli {

int TailCommand(const Arguments& args) {
  // Taken synchronously below, and blocked before any thread starts so that every thread
  // inherits the mask: a signal ends the loop, never the process mid-line.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  int exit_code = 0;
  auto config = LoadOrReport(args, &exit_code);
  if (!config) return exit_code;
  const config::LogStream stream = LogStreamOf(*config, args.stream);
  auto options = LogRedisOptionsOrReport(*config, &exit_code);
  if (!options) return exit_code;
  auto archive = ArchiveOrReport(*config, stream, &exit_code);
  if (exit_code != 0) return exit_code;

  // --since T is inclusive: follow from just below it.
  std::string after = "$";
  if (!args.since.empty()) {
    const auto since = log::ParseId(args.since).value_or(log::kMinId);
    after = log::FormatId(log::Predecessor(since).value_or(log::kMinId));
  }
  log::FollowHub hub(*options, archive.get());
  auto follower = hub.Follow(args.stream, after);
  std::vector<StreamEntry> batch;
  bool reported_down = false;
  while (true) {
    Status status = follower->Next(&batch, Millis(200));
    for (const auto& entry : batch) {
      std::cout << (args.json ? delivery::EncodeLogEntry(entry) : EntryLine(entry)) << "\n";
    }
    if (!batch.empty()) std::cout.flush();
    if (!status.ok()) {
      if (status.code() == StatusCode::kIo || status.code() == StatusCode::kTimeout) {
        if (!reported_down) {
          std::cerr << "streamcar: Redis unreachable, still following " << args.stream << ": "
                    << status.message() << "\n";
          reported_down = true;
        }
      } else if (status.code() != StatusCode::kCancelled) {
        std::cerr << "streamcar: cannot follow " << args.stream << ": " << status.message() << "\n";
        return 1;
      }
    } else {
      reported_down = false;
    }
    const timespec now{0, 0};
    if (sigtimedwait(&signals, nullptr, &now) > 0) break;
  }
  hub.Stop();
  return 0;
}

}  // namespace streamcar::cli
