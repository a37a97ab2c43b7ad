#include "sidecar/cli/args.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "sidecar/common/text.h"

namespace streamcar::cli {
namespace {

std::string CommandName(CommandKind command) {
  switch (command) {
    case CommandKind::kRun:
      return "run";
    case CommandKind::kCheck:
      return "check";
    case CommandKind::kStatus:
      return "status";
    case CommandKind::kDlqList:
      return "dlq list";
    case CommandKind::kDlqReplay:
      return "dlq replay";
    case CommandKind::kVersion:
      return "version";
  }
  return "run";
}

// Which options each command takes.
struct Accepts {
  bool config = false;
  bool json = false;
  bool subscription = false;
  bool count = false;
  bool id = false;
  bool dry_run = false;
};

Accepts AcceptsOf(CommandKind command) {
  switch (command) {
    case CommandKind::kRun:
    case CommandKind::kCheck:
      return {.config = true};
    case CommandKind::kStatus:
      return {.config = true, .json = true};
    case CommandKind::kDlqList:
      return {.config = true, .json = true, .subscription = true, .count = true};
    case CommandKind::kDlqReplay:
      return {.config = true, .subscription = true, .count = true, .id = true, .dry_run = true};
    case CommandKind::kVersion:
      return {};
  }
  return {};
}

}  // namespace

std::string GeneralHelp() {
  return "streamcar - deliver a Redis/Valkey stream consumer group to an HTTP handler\n"
         "\n"
         "Usage:\n"
         "  streamcar run    [-c FILE]          run the sidecar (the default command)\n"
         "  streamcar check  [-c FILE]          validate FILE, print the effective config\n"
         "  streamcar status [-c FILE] [--json] stream length, pending, lag, consumers, DLQ\n"
         "  streamcar dlq list   [-c FILE] --subscription NAME [--count N] [--json]\n"
         "  streamcar dlq replay [-c FILE] --subscription NAME [--count N] [--id ID ...] "
         "[--dry-run]\n"
         "  streamcar version\n"
         "\n"
         "Options:\n"
         "  -c, --config FILE  configuration file (default: $STREAMCAR_CONFIG, else " +
         std::string(kDefaultConfigPath) +
         ")\n"
         "  -h, --help         help for any command\n"
         "\n"
         "Exit codes: 0 success, 1 runtime failure retrying cannot fix, 2 usage or config error.\n";
}

std::string HelpText(CommandKind command) {
  switch (command) {
    case CommandKind::kRun:
      return "Usage: streamcar run [-c FILE]\n\n"
             "Joins each subscription's consumer group and delivers its entries to the handler.\n"
             "Stops on SIGTERM or SIGINT after draining in-flight deliveries (exit 0).\n"
             "Set STREAMCAR_LOG_LEVEL=debug|info|warn|error for the log level.\n";
    case CommandKind::kCheck:
      return "Usage: streamcar check [-c FILE]\n\n"
             "Validates FILE and prints the effective configuration as YAML (defaults filled in,\n"
             "variables expanded, password shown as \"***\"). Exit 0 when valid, 2 otherwise.\n";
    case CommandKind::kStatus:
      return "Usage: streamcar status [-c FILE] [--json]\n\n"
             "Per subscription: stream length, first and last ids, pending entries, lag,\n"
             "consumers and the dead-letter stream's length.\n";
    case CommandKind::kDlqList:
      return "Usage: streamcar dlq list [-c FILE] --subscription NAME [--count N] [--json]\n\n"
             "Shows dead letters: original id, reason, status, error, attempts, time.\n";
    case CommandKind::kDlqReplay:
      return "Usage: streamcar dlq replay [-c FILE] --subscription NAME [--count N] [--id ID ...] "
             "[--dry-run]\n\n"
             "Moves dead letters back onto the source stream (original fields only) and deletes\n"
             "them from the dead-letter stream, one entry at a time: the dead letter is deleted "
             "only\n"
             "after its copy was added (one script per entry).\n";
    case CommandKind::kVersion:
      return "Usage: streamcar version\n\nPrints the version.\n";
  }
  return GeneralHelp();
}

std::optional<Arguments> ParseArguments(const std::vector<std::string>& args, std::string* error) {
  Arguments parsed;
  size_t i = 0;
  auto fail = [&](std::string message) -> std::optional<Arguments> {
    *error = std::move(message);
    return std::nullopt;
  };
  if (i < args.size() && !args[i].starts_with("-")) {
    const std::string& word = args[i++];
    parsed.command_given = true;
    if (word == "run") {
      parsed.command = CommandKind::kRun;
    } else if (word == "check") {
      parsed.command = CommandKind::kCheck;
    } else if (word == "status") {
      parsed.command = CommandKind::kStatus;
    } else if (word == "version") {
      parsed.command = CommandKind::kVersion;
    } else if (word == "dlq") {
      if (i >= args.size() || args[i].starts_with("-")) {
        if (i < args.size() && (args[i] == "--help" || args[i] == "-h")) {
          parsed.help = true;
          parsed.command = CommandKind::kDlqList;
          return parsed;
        }
        return fail("dlq needs a subcommand: list or replay");
      }
      const std::string& sub = args[i++];
      if (sub == "list") {
        parsed.command = CommandKind::kDlqList;
      } else if (sub == "replay") {
        parsed.command = CommandKind::kDlqReplay;
      } else {
        return fail("unknown dlq subcommand \"" + sub + "\" (use list or replay)");
      }
    } else {
      std::string message = "unknown command \"" + word + "\"";
      if (auto meant = ClosestMatch(word, {"run", "check", "status", "dlq", "version"})) {
        message += " (did you mean " + *meant + "?)";
      } else {
        message += " (commands: run, check, status, dlq, version)";
      }
      return fail(message);
    }
  }
  const Accepts accepts = AcceptsOf(parsed.command);
  std::optional<std::string> config_flag;
  while (i < args.size()) {
    std::string arg = args[i++];
    std::optional<std::string> inline_value;
    if (arg.starts_with("--")) {
      if (auto eq = arg.find('='); eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      }
    }
    auto value = [&]() -> std::optional<std::string> {
      if (inline_value) return inline_value;
      if (i >= args.size()) return std::nullopt;
      return args[i++];
    };
    const std::string command = CommandName(parsed.command);
    auto not_here = [&]() {
      return fail("option " + arg + " does not apply to \"" + command + "\"");
    };
    if (arg == "-h" || arg == "--help") {
      parsed.help = true;
      return parsed;
    }
    if (arg == "-c" || arg == "--config") {
      if (!accepts.config) return not_here();
      auto v = value();
      if (!v || v->empty()) return fail(arg + " needs a file path");
      config_flag = *v;
    } else if (arg == "--json") {
      if (!accepts.json) return not_here();
      parsed.json = true;
    } else if (arg == "--subscription") {
      if (!accepts.subscription) return not_here();
      auto v = value();
      if (!v || v->empty()) return fail("--subscription needs a subscription name");
      parsed.subscription = *v;
    } else if (arg == "--count") {
      if (!accepts.count) return not_here();
      auto v = value();
      long count = 0;
      if (!v) return fail("--count needs a number");
      auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), count);
      if (ec != std::errc() || end != v->data() + v->size() || count < 1) {
        return fail("--count must be a whole number of at least 1 (got \"" + *v + "\")");
      }
      parsed.count = count;
    } else if (arg == "--id") {
      if (!accepts.id) return not_here();
      auto v = value();
      if (!v || !ParseEntryId(*v)) return fail("--id needs an entry id like 1700000000000-0");
      // An id given twice is replayed once (SPEC 3.3).
      if (std::find(parsed.ids.begin(), parsed.ids.end(), *v) == parsed.ids.end()) {
        parsed.ids.push_back(*v);
      }
    } else if (arg == "--dry-run") {
      if (!accepts.dry_run) return not_here();
      parsed.dry_run = true;
    } else if (arg.starts_with("-")) {
      return fail("unknown option " + arg + " for \"" + command + "\" (see streamcar " + command +
                  " --help)");
    } else {
      return fail("unexpected argument \"" + arg + "\" for \"" + command + "\"");
    }
  }
  if ((parsed.command == CommandKind::kDlqList || parsed.command == CommandKind::kDlqReplay) &&
      parsed.subscription.empty()) {
    return fail(CommandName(parsed.command) + " needs --subscription NAME");
  }
  if (config_flag) {
    parsed.config_path = *config_flag;
  } else if (const char* env = std::getenv("STREAMCAR_CONFIG"); env != nullptr && *env != '\0') {
    parsed.config_path = env;
  } else {
    parsed.config_path = kDefaultConfigPath;
  }
  return parsed;
}

}  // namespace streamcar::cli
