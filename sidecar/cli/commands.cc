#include "sidecar/cli/commands.h"

#include <iostream>

#include "sidecar/app/run.h"
#include "sidecar/cli/command_line.h"
#include "sidecar/cli/completion.h"
#include "sidecar/cli/man_page.h"
#include "sidecar/common/log.h"
#include "sidecar/common/version.h"
#include "sidecar/config/loader.h"

namespace streamcar::cli {

namespace {

// The commands that only print what this binary is: they read no configuration and log nothing.
bool PrintsOnly(CommandKind command) {
  return command == CommandKind::kVersion || command == CommandKind::kCompletion ||
         command == CommandKind::kMan;
}

}  // namespace

int Dispatch(const Arguments& args) {
  if (!args.help_text.empty()) {
    std::cout << args.help_text;
    return 0;
  }
  // Every command that works logs at this level; a misspelt one must not log at another.
  if (!PrintsOnly(args.command)) {
    if (const Status level = SetLogLevelFromEnv(); !level.ok()) {
      std::cerr << "streamcar: " << level.message() << "\n";
      return 2;
    }
  }
  switch (args.command) {
    case CommandKind::kRun:
      return RunCommand(args);
    case CommandKind::kCheck:
      return CheckCommand(args);
    case CommandKind::kVersion:
      return VersionCommand();
    case CommandKind::kStatus:
      return StatusCommand(args);
    case CommandKind::kDlqList:
      return DlqListCommand(args);
    case CommandKind::kDlqReplay:
      return DlqReplayCommand(args);
    case CommandKind::kProduce:
      return ProduceCommand(args);
    case CommandKind::kRead:
      return ReadCommand(args);
    case CommandKind::kTail:
      return TailCommand(args);
    case CommandKind::kRoute:
      return RouteCommand(args);
    case CommandKind::kTrim:
      return TrimCommand(args);
    case CommandKind::kCompletion:
      std::cout << CompletionScript(CommandLine(), args.shell);
      return 0;
    case CommandKind::kMan:
      std::cout << ManPage(CommandLine());
      return 0;
  }
  return 2;
}

int CheckCommand(const Arguments& args) {
  auto config = config::LoadConfigFile(args.config_path);
  if (!config.ok()) {
    std::cerr << "streamcar: " << config.status().message() << "\n";
    return 2;
  }
  std::cout << config::EmitEffectiveYaml(*config);
  return 0;
}

int RunCommand(const Arguments& args) {
  auto config = config::LoadConfigFile(args.config_path);
  if (!config.ok()) {
    std::cerr << "streamcar: " << config.status().message() << "\n";
    return 2;
  }
  auto tuning = runtime::TuningFromEnvironment();
  if (!tuning.ok()) {
    std::cerr << "streamcar: " << tuning.status().message() << "\n";
    return 2;
  }
  return app::Run(*config, *tuning);
}

int VersionCommand() {
  std::cout << "streamcar " << kVersion << " (revision " << kRevision << ", built " << kBuildDate
            << ")\n";
  return 0;
}

}  // namespace streamcar::cli
