#include "sidecar/cli/args.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "sidecar/common/text.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/log/log_reader.h"

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
    case CommandKind::kProduce:
      return "produce";
    case CommandKind::kRead:
      return "read";
    case CommandKind::kTail:
      return "tail";
    case CommandKind::kRoute:
      return "route";
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
  bool stream = false;           // a STREAM argument (required)
  bool fields = false;           // FIELD=VALUE arguments after it
  bool produce_options = false;  // --idempotency-key, --id ID (one)
  bool since = false;
  bool until = false;
  bool key = false;  // a KEY argument (required; may be "")
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
    case CommandKind::kProduce:
      return {.config = true, .id = true, .stream = true, .fields = true, .produce_options = true};
    case CommandKind::kRead:
      return {.config = true,
              .json = true,
              .count = true,
              .stream = true,
              .since = true,
              .until = true};
    case CommandKind::kTail:
      return {.config = true, .json = true, .stream = true, .since = true};
    case CommandKind::kRoute:
      return {.config = true, .subscription = true, .key = true};
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
         "  streamcar produce [-c FILE] STREAM FIELD=VALUE ...   append one entry, print its id\n"
         "  streamcar read   [-c FILE] STREAM [--since T] [--until T] [--count N] [--json]\n"
         "  streamcar tail   [-c FILE] STREAM [--since T]  follow new entries until interrupted\n"
         "  streamcar route  [-c FILE] --subscription NAME KEY  the shard KEY goes to (sharded)\n"
         "  streamcar version                   version, revision and build date (also --version)\n"
         "\n"
         "Options:\n"
         "  -c, --config FILE  configuration file (default: $STREAMCAR_CONFIG, else " +
         std::string(kDefaultConfigPath) +
         ")\n"
         "  -h, --help         help for any command (also: streamcar help COMMAND)\n"
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
    case CommandKind::kProduce:
      return "Usage: streamcar produce [-c FILE] STREAM FIELD=VALUE ... [--idempotency-key K] "
             "[--id ID] [--key KEY]\n\n"
             "Appends one entry to STREAM and prints its id (the receipt). Each FIELD=VALUE is "
             "one\n"
             "field, in order; the value is everything after the first '='. A stream listed under\n"
             "`streams:` uses its max_len and notify settings; one with produce: false is "
             "refused.\n"
             "  --idempotency-key K  a repeat of K within api.idempotency_ttl appends nothing and\n"
             "                       prints the first append's id\n"
             "  --id ID              append with exactly this id (<ms>-<seq>); an id not above "
             "the\n"
             "                       stream's top fails (exit 1) and names the top\n"
             "  --key KEY            a stream a sharded subscription reads: the shard KEY goes to\n"
             "                       (crc32(KEY) mod shards, as streamcar route prints); required\n"
             "  --                   every later argument is a FIELD=VALUE, even one starting with "
             "-\n";
    case CommandKind::kRead:
      return "Usage: streamcar read [-c FILE] STREAM [--since T] [--until T] [--count N] "
             "[--json]\n\n"
             "Prints the entries of STREAM in [since, until), oldest first: archived entries (a\n"
             "stream with archive: true) and the live stream merged, with no gap and no "
             "duplicate.\n"
             "T is an RFC 3339 instant (2026-11-30T14:30:00Z), milliseconds since the epoch or an\n"
             "entry id. --count caps the entries printed (default 100). One line per entry (id,\n"
             "time, fields), or with --json one document {\"stream\",\"entries\",\"next\"}, the\n"
             "entries as the log API encodes them.\n";
    case CommandKind::kTail:
      return "Usage: streamcar tail [-c FILE] STREAM [--since T] [--json]\n\n"
             "Prints new entries of STREAM as they are appended, until SIGINT or SIGTERM (exit "
             "0).\n"
             "--since T starts at T (an RFC 3339 instant, milliseconds or an entry id; archived\n"
             "entries included) instead of now. With --json one entry per line as JSON.\n";
    case CommandKind::kRoute:
      return "Usage: streamcar route [-c FILE] --subscription NAME KEY\n\n"
             "Prints the shard of the sharded subscription NAME that a producer puts KEY in, and\n"
             "that shard's stream key: \"<index> <key>\", for example \"3 orders:{3}\". The index\n"
             "is crc32(KEY) mod shards (CRC-32/IEEE, as zlib's crc32), so producers in any\n"
             "language route alike. Reads only the configuration.\n";
    case CommandKind::kVersion:
      return "Usage: streamcar version (or --version)\n\n"
             "Prints the version, the source revision and the build date.\n";
  }
  return GeneralHelp();
}

std::optional<Arguments> ParseArguments(const std::vector<std::string>& args, std::string* error) {
  // SPEC 1: `help COMMAND ...` is `COMMAND ... --help`; `help` alone is the general help.
  if (!args.empty() && args[0] == "help") {
    std::vector<std::string> asked(args.begin() + 1, args.end());
    asked.emplace_back("--help");
    return ParseArguments(asked, error);
  }
  Arguments parsed;
  size_t i = 0;
  auto fail = [&](std::string message) -> std::optional<Arguments> {
    *error = std::move(message);
    return std::nullopt;
  };
  // SPEC 1: `--version` is `version`.
  const bool version_flag = !args.empty() && args[0] == "--version";
  if (i < args.size() && (!args[i].starts_with("-") || version_flag)) {
    const std::string word = version_flag ? std::string("version") : args[i];
    ++i;
    parsed.command_given = true;
    if (word == "run") {
      parsed.command = CommandKind::kRun;
    } else if (word == "check") {
      parsed.command = CommandKind::kCheck;
    } else if (word == "status") {
      parsed.command = CommandKind::kStatus;
    } else if (word == "version") {
      parsed.command = CommandKind::kVersion;
    } else if (word == "produce") {
      parsed.command = CommandKind::kProduce;
    } else if (word == "read") {
      parsed.command = CommandKind::kRead;
    } else if (word == "tail") {
      parsed.command = CommandKind::kTail;
    } else if (word == "route") {
      parsed.command = CommandKind::kRoute;
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
      if (auto meant = ClosestMatch(word, {"run", "check", "status", "dlq", "produce", "read",
                                           "tail", "route", "version"})) {
        message += " (did you mean " + *meant + "?)";
      } else {
        message += " (commands: run, check, status, dlq, produce, read, tail, route, version)";
      }
      return fail(message);
    }
  }
  const Accepts accepts = AcceptsOf(parsed.command);
  std::optional<std::string> config_flag;
  bool only_positionals = false;  // after "--"
  while (i < args.size()) {
    std::string arg = args[i++];
    const std::string command = CommandName(parsed.command);
    if (only_positionals || !arg.starts_with("-") || arg == "-") {
      // STREAM, then (produce) FIELD=VALUE ...
      if (accepts.key && !parsed.key_given) {
        parsed.key = arg;
        parsed.key_given = true;
        continue;
      }
      if (accepts.stream && parsed.stream.empty()) {
        if (arg.empty()) return fail(command + " needs a stream name, not \"\"");
        parsed.stream = arg;
        continue;
      }
      if (accepts.fields) {
        const auto eq = arg.find('=');
        if (eq == std::string::npos || eq == 0) {
          return fail("\"" + PrintableOneLine(arg) + "\" is not FIELD=VALUE");
        }
        parsed.fields.emplace_back(arg.substr(0, eq), arg.substr(eq + 1));
        continue;
      }
      return fail("unexpected argument \"" + arg + "\" for \"" + command + "\"");
    }
    if (arg == "--" && (accepts.fields || accepts.key)) {  // then a KEY may start with "-"
      only_positionals = true;
      continue;
    }
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
    } else if (arg == "--id" && accepts.produce_options) {
      auto v = value();
      if (!v || !log::ParseId(*v)) return fail("--id needs an entry id like 1700000000000-0");
      if (!parsed.entry_id.empty()) return fail("produce takes one --id");
      parsed.entry_id = *v;
    } else if (arg == "--key") {
      if (!accepts.produce_options) return not_here();
      auto v = value();
      if (!v || v->empty()) return fail("--key needs the entry's key");
      parsed.key = *v;
      parsed.key_given = true;
    } else if (arg == "--idempotency-key") {
      if (!accepts.produce_options) return not_here();
      auto v = value();
      if (!v || v->empty()) return fail("--idempotency-key needs a key");
      parsed.idempotency_key = *v;
    } else if (arg == "--since" || arg == "--until") {
      if (arg == "--since" ? !accepts.since : !accepts.until) return not_here();
      auto v = value();
      if (!v) return fail(arg + " needs a time or an entry id");
      auto bound = log::ParseBound(*v);
      if (!bound.ok()) return fail(arg + ": " + bound.status().message());
      (arg == "--since" ? parsed.since : parsed.until) = *bound;
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
  if (accepts.stream && parsed.stream.empty()) {
    return fail(CommandName(parsed.command) + " needs a STREAM argument");
  }
  if (parsed.command == CommandKind::kProduce && parsed.fields.empty()) {
    return fail("produce needs at least one FIELD=VALUE");
  }
  if (accepts.key && !parsed.key_given) return fail("route needs a KEY argument");
  if ((parsed.command == CommandKind::kDlqList || parsed.command == CommandKind::kDlqReplay ||
       parsed.command == CommandKind::kRoute) &&
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
