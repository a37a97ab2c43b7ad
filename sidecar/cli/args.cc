#include "sidecar/cli/args.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "sidecar/common/duration.h"
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
    case CommandKind::kTrim:
      return "trim";
    case CommandKind::kVersion:
      return "version";
  }
  return "run";
}

// A decimal number of at least 0, all of `text`.
std::optional<int64_t> WholeNumber(const std::string& text) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < 0) {
    return std::nullopt;
  }
  return n;
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
  bool key = false;         // a KEY argument (required; may be "")
  bool trim_point = false;  // --max-len, --max-age, --min-id (exactly one)
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
    case CommandKind::kTrim:
      return {.config = true, .dry_run = true, .stream = true, .trim_point = true};
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
         "  streamcar trim   [-c FILE] STREAM [--max-len N | --max-age D | --min-id ID] "
         "[--dry-run]\n"
         "                                     trim now; an archived stream is folded first\n"
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

namespace {

std::string TrimHelp() {
  return "Usage: streamcar trim [-c FILE] STREAM [--max-len N | --max-age D | --min-id ID] "
         "[--dry-run]\n\n"
         "Trims STREAM now, exactly (no ~). STREAM must be listed under `streams:`. One of:\n"
         "  --max-len N   keep the newest N entries\n"
         "  --max-age D   keep the entries younger than D (1h, 30m, 1h30m), by Redis's clock\n"
         "  --min-id ID   keep the entries at or above ID (an entry id, milliseconds or an RFC\n"
         "                3339 instant)\n"
         "  --dry-run     print what would be folded and trimmed; change nothing\n"
         "A stream with archive: true is folded into the archive first, under the same lease as\n"
         "the retention beat (waiting up to 60 s for a beat in progress), and trimmed only at or\n"
         "below what was folded: `streamcar read` still returns every entry. Prints one line:\n"
         "  folded N entries (K new) up to W into URL; trimmed M entries (STREAM: L left)\n"
         "  trimmed M entries (STREAM: L left)                    (a stream without archive)\n"
         "and with --dry-run the same with \"would fold\", \"would trim\" and \"would be left\".\n";
}

}  // namespace

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
    case CommandKind::kTrim:
      return TrimHelp();
    case CommandKind::kVersion:
      return "Usage: streamcar version (or --version)\n\n"
             "Prints the version, the source revision and the build date.\n";
  }
  return GeneralHelp();
}

namespace {

// The grammar of ParseArguments: one pass over argv, one method per kind of argument (the
// command word, a positional, an option that takes its value or not), then the checks of what
// must have been given. A method answers kNext to go on, kDone when parsing ends early with a
// result (--help), kFailed with error_ set; an option method answers kNotMine for an option it
// does not know, so the next one may try it.
class ArgumentParser {
 public:
  explicit ArgumentParser(const std::vector<std::string>& args) : args_(args) {}

  std::optional<Arguments> Parse(std::string* error) {
    Step step = ParseCommand();
    if (step == Step::kNext) {
      accepts_ = AcceptsOf(parsed_.command);
      while (step == Step::kNext && next_ < args_.size()) step = ParseArgument(args_[next_++]);
      if (step == Step::kNext) step = CheckRequired();
    }
    if (step == Step::kFailed) {
      *error = std::move(error_);
      return std::nullopt;
    }
    if (step == Step::kNext) ResolveConfigPath();
    return parsed_;
  }

 private:
  enum class Step { kNext, kDone, kFailed, kNotMine };

  Step Fail(std::string message) {
    error_ = std::move(message);
    return Step::kFailed;
  }

  // The command word, when the first argument is not an option (SPEC 1: `--version` is
  // `version`).
  Step ParseCommand() {
    const bool version_flag = !args_.empty() && args_[0] == "--version";
    if (next_ >= args_.size() || (args_[next_].starts_with("-") && !version_flag)) {
      return Step::kNext;
    }
    const std::string word = version_flag ? std::string("version") : args_[next_];
    ++next_;
    parsed_.command_given = true;
    static const std::vector<std::pair<std::string, CommandKind>> command_words = {
        {"run", CommandKind::kRun},         {"check", CommandKind::kCheck},
        {"status", CommandKind::kStatus},   {"version", CommandKind::kVersion},
        {"produce", CommandKind::kProduce}, {"read", CommandKind::kRead},
        {"tail", CommandKind::kTail},       {"route", CommandKind::kRoute},
        {"trim", CommandKind::kTrim},
    };
    for (const auto& [name, kind] : command_words) {
      if (word != name) continue;
      parsed_.command = kind;
      return Step::kNext;
    }
    if (word == "dlq") return ParseDlqSubcommand();
    std::string message = "unknown command \"" + word + "\"";
    if (auto meant = ClosestMatch(word, {"run", "check", "status", "dlq", "produce", "read", "tail",
                                         "route", "trim", "version"})) {
      message += " (did you mean " + *meant + "?)";
    } else {
      message += " (commands: run, check, status, dlq, produce, read, tail, route, trim, version)";
    }
    return Fail(message);
  }

  Step ParseDlqSubcommand() {
    if (next_ >= args_.size() || args_[next_].starts_with("-")) {
      if (next_ < args_.size() && (args_[next_] == "--help" || args_[next_] == "-h")) {
        parsed_.help = true;
        parsed_.command = CommandKind::kDlqList;
        return Step::kDone;
      }
      return Fail("dlq needs a subcommand: list or replay");
    }
    const std::string& sub = args_[next_++];
    if (sub == "list") {
      parsed_.command = CommandKind::kDlqList;
    } else if (sub == "replay") {
      parsed_.command = CommandKind::kDlqReplay;
    } else {
      return Fail("unknown dlq subcommand \"" + sub + "\" (use list or replay)");
    }
    return Step::kNext;
  }

  Step ParseArgument(std::string arg) {
    if (only_positionals_ || !arg.starts_with("-") || arg == "-") return ParsePositional(arg);
    if (arg == "--" && (accepts_.fields || accepts_.key)) {  // then a KEY may start with "-"
      only_positionals_ = true;
      return Step::kNext;
    }
    inline_value_.reset();
    if (arg.starts_with("--")) {
      if (auto eq = arg.find('='); eq != std::string::npos) {
        inline_value_ = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      }
    }
    if (arg == "-h" || arg == "--help") {
      parsed_.help = true;
      return Step::kDone;
    }
    if (Step step = ParseSelectionOption(arg); step != Step::kNotMine) return step;
    if (Step step = ParseEntryOption(arg); step != Step::kNotMine) return step;
    if (Step step = ParseTrimOption(arg); step != Step::kNotMine) return step;
    if (arg.starts_with("-")) {
      return Fail("unknown option " + arg + " for \"" + Command() + "\" (see streamcar " +
                  Command() + " --help)");
    }
    return Fail("unexpected argument \"" + arg + "\" for \"" + Command() + "\"");
  }

  // KEY (route), STREAM, then (produce) FIELD=VALUE ...
  Step ParsePositional(const std::string& arg) {
    if (accepts_.key && !parsed_.key_given) {
      parsed_.key = arg;
      parsed_.key_given = true;
      return Step::kNext;
    }
    if (accepts_.stream && parsed_.stream.empty()) {
      if (arg.empty()) return Fail(Command() + " needs a stream name, not \"\"");
      parsed_.stream = arg;
      return Step::kNext;
    }
    if (accepts_.fields) {
      const auto eq = arg.find('=');
      if (eq == std::string::npos || eq == 0) {
        return Fail("\"" + PrintableOneLine(arg) + "\" is not FIELD=VALUE");
      }
      parsed_.fields.emplace_back(arg.substr(0, eq), arg.substr(eq + 1));
      return Step::kNext;
    }
    return Fail("unexpected argument \"" + arg + "\" for \"" + Command() + "\"");
  }

  // The options that choose the configuration, the subscription and the output.
  Step ParseSelectionOption(const std::string& arg) {
    if (arg == "-c" || arg == "--config") {
      if (!accepts_.config) return NotHere(arg);
      auto v = Value();
      if (!v || v->empty()) return Fail(arg + " needs a file path");
      config_flag_ = *v;
    } else if (arg == "--json") {
      if (!accepts_.json) return NotHere(arg);
      parsed_.json = true;
    } else if (arg == "--subscription") {
      if (!accepts_.subscription) return NotHere(arg);
      auto v = Value();
      if (!v || v->empty()) return Fail("--subscription needs a subscription name");
      parsed_.subscription = *v;
    } else if (arg == "--count") {
      if (!accepts_.count) return NotHere(arg);
      auto v = Value();
      long count = 0;
      if (!v) return Fail("--count needs a number");
      auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), count);
      if (ec != std::errc() || end != v->data() + v->size() || count < 1) {
        return Fail("--count must be a whole number of at least 1 (got \"" + *v + "\")");
      }
      parsed_.count = count;
    } else if (arg == "--dry-run") {
      if (!accepts_.dry_run) return NotHere(arg);
      parsed_.dry_run = true;
    } else {
      return Step::kNotMine;
    }
    return Step::kNext;
  }

  // The options that name entries: ids, keys and time bounds.
  Step ParseEntryOption(const std::string& arg) {
    if (arg == "--id" && accepts_.produce_options) {
      auto v = Value();
      if (!v || !log::ParseId(*v)) return Fail("--id needs an entry id like 1700000000000-0");
      if (!parsed_.entry_id.empty()) return Fail("produce takes one --id");
      parsed_.entry_id = *v;
    } else if (arg == "--key") {
      if (!accepts_.produce_options) return NotHere(arg);
      auto v = Value();
      if (!v || v->empty()) return Fail("--key needs the entry's key");
      parsed_.key = *v;
      parsed_.key_given = true;
    } else if (arg == "--idempotency-key") {
      if (!accepts_.produce_options) return NotHere(arg);
      auto v = Value();
      if (!v || v->empty()) return Fail("--idempotency-key needs a key");
      parsed_.idempotency_key = *v;
    } else if (arg == "--since" || arg == "--until") {
      if (arg == "--since" ? !accepts_.since : !accepts_.until) return NotHere(arg);
      auto v = Value();
      if (!v) return Fail(arg + " needs a time or an entry id");
      auto bound = log::ParseBound(*v);
      if (!bound.ok()) return Fail(arg + ": " + bound.status().message());
      (arg == "--since" ? parsed_.since : parsed_.until) = *bound;
    } else if (arg == "--id") {
      if (!accepts_.id) return NotHere(arg);
      auto v = Value();
      if (!v || !ParseEntryId(*v)) return Fail("--id needs an entry id like 1700000000000-0");
      // An id given twice is replayed once (SPEC 3.3).
      if (std::find(parsed_.ids.begin(), parsed_.ids.end(), *v) == parsed_.ids.end()) {
        parsed_.ids.push_back(*v);
      }
    } else {
      return Step::kNotMine;
    }
    return Step::kNext;
  }

  // trim's selectors: where the stream is cut.
  Step ParseTrimOption(const std::string& arg) {
    if (arg != "--max-len" && arg != "--max-age" && arg != "--min-id") return Step::kNotMine;
    if (!accepts_.trim_point) return NotHere(arg);
    ++trim_points_;
    auto v = Value();
    if (arg == "--max-len") {
      auto n = v ? WholeNumber(*v) : std::nullopt;
      if (!n) {
        return Fail("--max-len must be a whole number of at least 0 (got \"" +
                    PrintableOneLine(v.value_or("")) + "\")");
      }
      parsed_.max_len = n;
    } else if (arg == "--max-age") {
      std::string why;
      auto age = v ? ParseDuration(*v, &why) : std::nullopt;
      if (!age) return Fail("--max-age needs a duration like 24h or 90m" + (v ? ": " + why : ""));
      parsed_.max_age = *age;
    } else {
      if (!v) return Fail("--min-id needs an entry id, milliseconds or an RFC 3339 instant");
      auto bound = log::ParseBound(*v);
      if (!bound.ok()) return Fail("--min-id: " + bound.status().message());
      parsed_.min_id = *bound;
    }
    return Step::kNext;
  }

  // What the command needs once every argument is read.
  Step CheckRequired() {
    if (accepts_.trim_point && trim_points_ != 1) {
      return Fail(trim_points_ == 0 ? "trim needs one of --max-len N, --max-age D or --min-id ID"
                                    : "trim takes exactly one of --max-len, --max-age and "
                                      "--min-id");
    }
    if (accepts_.stream && parsed_.stream.empty()) {
      return Fail(Command() + " needs a STREAM argument");
    }
    if (parsed_.command == CommandKind::kProduce && parsed_.fields.empty()) {
      return Fail("produce needs at least one FIELD=VALUE");
    }
    if (accepts_.key && !parsed_.key_given) return Fail("route needs a KEY argument");
    if ((parsed_.command == CommandKind::kDlqList || parsed_.command == CommandKind::kDlqReplay ||
         parsed_.command == CommandKind::kRoute) &&
        parsed_.subscription.empty()) {
      return Fail(Command() + " needs --subscription NAME");
    }
    return Step::kNext;
  }

  void ResolveConfigPath() {
    if (config_flag_) {
      parsed_.config_path = *config_flag_;
    } else if (const char* env = std::getenv("STREAMCAR_CONFIG"); env != nullptr && *env != '\0') {
      parsed_.config_path = env;
    } else {
      parsed_.config_path = kDefaultConfigPath;
    }
  }

  // The option's value: after its '=' (--name=value), else the next argument.
  std::optional<std::string> Value() {
    if (inline_value_) return inline_value_;
    if (next_ >= args_.size()) return std::nullopt;
    return args_[next_++];
  }

  Step NotHere(const std::string& option) {
    return Fail("option " + option + " does not apply to \"" + Command() + "\"");
  }

  std::string Command() const { return CommandName(parsed_.command); }

  const std::vector<std::string>& args_;
  size_t next_ = 0;  // the next argument to read
  Arguments parsed_;
  Accepts accepts_;
  std::optional<std::string> config_flag_;
  std::optional<std::string> inline_value_;  // the current option's "=value"
  bool only_positionals_ = false;            // after "--"
  int trim_points_ = 0;                      // trim selectors given (each counts, repeats too)
  std::string error_;
};

}  // namespace

std::optional<Arguments> ParseArguments(const std::vector<std::string>& args, std::string* error) {
  // SPEC 1: `help COMMAND ...` is `COMMAND ... --help`; `help` alone is the general help.
  if (!args.empty() && args[0] == "help") {
    std::vector<std::string> asked(args.begin() + 1, args.end());
    asked.emplace_back("--help");
    return ParseArguments(asked, error);
  }
  return ArgumentParser(args).Parse(error);
}

}  // namespace streamcar::cli
