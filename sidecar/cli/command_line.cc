#include "sidecar/cli/command_line.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <sstream>

#include "sidecar/common/duration.h"
#include "sidecar/common/text.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/log/log_reader.h"

namespace streamcar::cli {
namespace {

// The checks of option values. CLI11 reports a failed check as "<option>: <message>"; a check
// may also rewrite the value it accepted (a time becomes the entry id it stands for).
CLI::Validator Check(std::function<std::string(std::string&)> check) {
  return {std::move(check), ""};
}

CLI::Validator NotEmpty(const std::string& what) {
  return Check([what](std::string& v) -> std::string {
    return v.empty() ? "needs " + what : std::string();
  });
}

// A decimal number of at least `least`, all of the text.
CLI::Validator WholeNumber(int64_t least) {
  return Check([least](std::string& v) -> std::string {
    int64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (!v.empty() && ec == std::errc() && end == v.data() + v.size() && n >= least) return "";
    return "must be a whole number of at least " + std::to_string(least) + " (got \"" +
           PrintableOneLine(v) + "\")";
  });
}

// An RFC 3339 instant, milliseconds or an entry id, rewritten to the entry id.
CLI::Validator Bound() {
  return Check([](std::string& v) -> std::string {
    auto bound = log::ParseBound(v);
    if (!bound.ok()) return bound.status().message();
    v = *bound;
    return std::string();
  });
}

CLI::Validator EntryId() {
  return Check([](std::string& v) -> std::string {
    return log::ParseId(v)
               ? ""
               : "needs an entry id like 1700000000000-0 (got \"" + PrintableOneLine(v) + "\")";
  });
}

CLI::Validator Duration() {
  return Check([](std::string& v) -> std::string {
    std::string why;
    return ParseDuration(v, &why) ? "" : "needs a duration like 24h or 90m: " + why;
  });
}

CLI::Validator FieldValue() {
  return Check([](std::string& v) -> std::string {
    const auto eq = v.find('=');
    return eq == std::string::npos || eq == 0 ? "\"" + PrintableOneLine(v) + "\" is not FIELD=VALUE"
                                              : "";
  });
}

// The help layout: the synopsis of SPEC 1 first (CLI11's own usage line would say only
// "[OPTIONS]"), then what the command does, its arguments, options, subcommands and notes.
class Formatter : public CLI::Formatter {
 public:
  explicit Formatter(const CommandLine* line) : line_(line) {}

  std::string make_usage(const CLI::App* app, std::string name) const override {
    const CommandInfo* info = line_->Find(app);
    return "Usage: " + (info != nullptr ? info->synopsis : name) + "\n";
  }

  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    std::ostringstream out;
    out << make_usage(app, name) << "\n" << app->get_description() << "\n";
    out << make_positionals(app) << make_groups(app, mode) << make_subcommands(app, mode);
    if (!app->get_footer().empty()) out << "\n" << app->get_footer() << "\n";
    return out.str();
  }

  // The commands under this one, each as its synopsis and what it does (a group's subcommands
  // too: `streamcar --help` shows `dlq list` and `dlq replay` in full).
  std::string make_subcommands(const CLI::App* app, CLI::AppFormatMode /*mode*/) const override {
    std::string out;
    for (const CommandInfo& info : line_->commands()) {
      const bool leaf = info.kind.has_value() || info.words == "help";
      if (!leaf || info.app->get_group().empty() || !Under(info.app, app)) continue;
      out += "  " + info.synopsis + "\n      " + info.app->get_description() + "\n";
    }
    return out.empty() ? out : "\nCommands:\n" + out;
  }

 private:
  static bool Under(const CLI::App* app, const CLI::App* ancestor) {
    for (const CLI::App* up = app->get_parent(); up != nullptr; up = up->get_parent()) {
      if (up == ancestor) return true;
    }
    return false;
  }

  const CommandLine* line_;
};

void AddConfig(CLI::App* app, Given& given) {
  app->add_option("-c,--config", given.config,
                  "configuration file (default: $STREAMCAR_CONFIG, else " +
                      std::string(kDefaultConfigPath) + ")")
      ->type_name("FILE")
      ->check(NotEmpty("a file path"));
}

void AddCount(CLI::App* app, Given& given, const std::string& what) {
  app->add_option("--count", given.count, what)->type_name("N")->check(WholeNumber(1));
}

void AddSubscription(CLI::App* app, Given& given) {
  app->add_option("--subscription", given.subscription,
                  "the subscription, as <stream>/<group> (status lists them)")
      ->type_name("NAME")
      ->required()
      ->check(NotEmpty("a subscription name"));
}

}  // namespace

CommandLine::CommandLine()
    : root_(std::make_unique<CLI::App>(
          "Delivers a Redis/Valkey stream consumer group to an HTTP handler.", "streamcar")) {
  root_->formatter(std::make_shared<Formatter>(this));
  root_->set_help_flag("-h,--help", "print this help and exit");
  root_->set_version_flag("--version", "", "print the version, revision and build date");
  root_->require_subcommand(1);

  commands_.push_back({root_.get(), "", "streamcar COMMAND [OPTIONS]", std::nullopt});
  DefineRunAndCheck();
  DefineStatusAndDlq();
  DefineLogCommands();
  DefineTrimAndRoute();
  DefineToolCommands();
  // After the subcommands: CLI11 gives a new subcommand its parent's footer.
  root_->footer(
      "`streamcar help COMMAND` is `streamcar COMMAND --help`. With no command, streamcar runs\n"
      "the sidecar (`streamcar run`).\n"
      "Environment: STREAMCAR_CONFIG (the default -c), STREAMCAR_LOG_LEVEL (debug, info, warn,\n"
      "error; another value exits 2).\n"
      "Exit codes: 0 success, 1 runtime failure retrying cannot fix, 2 usage or config error.");
}

CommandLine::~CommandLine() = default;

const CommandInfo* CommandLine::Find(const CLI::App* app) const {
  for (const CommandInfo& info : commands_) {
    if (info.app == app) return &info;
  }
  return nullptr;
}

const std::vector<std::string>* CommandLine::Choices(const CLI::Option* option) const {
  auto it = choices_.find(option);
  return it == choices_.end() ? nullptr : &it->second;
}

CLI::App* CommandLine::Add(CLI::App* parent, const std::string& name,
                           const std::string& description, std::optional<CommandKind> kind) {
  CLI::App* app = parent->add_subcommand(name, description);
  app->set_help_flag("-h,--help", "print this help and exit");
  const CommandInfo* parent_info = Find(parent);
  const std::string words =
      parent_info == nullptr || parent_info->words.empty() ? name : parent_info->words + " " + name;
  commands_.push_back({app, words, "streamcar " + words, kind});
  return app;
}

void CommandLine::DefineRunAndCheck() {
  CLI::App* run =
      Add(root_.get(), "run", "run the sidecar (the default command)", CommandKind::kRun);
  commands_.back().synopsis += " [-c FILE]";
  run->footer(
      "Joins each subscription's consumer group and delivers its entries to the handler.\n"
      "Stops on SIGTERM or SIGINT after draining in-flight deliveries (exit 0).\n"
      "Reads FILE again on SIGHUP and when it changes (a ConfigMap's update too): live keys\n"
      "apply, others are refused in one log line (docs/configuration.md, Reload).\n"
      "The log level: log.level in FILE, else STREAMCAR_LOG_LEVEL=debug|info|warn|error.");
  AddConfig(run, given_);

  CLI::App* check = Add(root_.get(), "check", "validate FILE and print the effective configuration",
                        CommandKind::kCheck);
  commands_.back().synopsis += " [-c FILE]";
  check->footer(
      "Prints the effective configuration as YAML (defaults filled in, variables expanded,\n"
      "password shown as \"***\"). Exit 0 when valid, 2 otherwise.");
  AddConfig(check, given_);
}

void CommandLine::DefineStatusAndDlq() {
  CLI::App* status =
      Add(root_.get(), "status", "stream length, pending, lag, consumers and DLQ length",
          CommandKind::kStatus);
  commands_.back().synopsis += " [-c FILE] [--json]";
  status->footer(
      "Per subscription: stream length, first and last ids, pending entries, lag, consumers\n"
      "and the dead-letter stream's length.");
  AddConfig(status, given_);
  status->add_flag("--json", given_.json, "one JSON document instead of a table");

  CLI::App* dlq = Add(root_.get(), "dlq", "dead letters: list and replay", std::nullopt);
  commands_.back().synopsis += " list|replay [OPTIONS]";
  dlq->require_subcommand(1);

  CLI::App* list = Add(dlq, "list", "show dead letters", CommandKind::kDlqList);
  commands_.back().synopsis += " [-c FILE] --subscription NAME [--count N] [--json]";
  list->footer("Shows dead letters: original id, reason, status, error, attempts, time.");
  AddConfig(list, given_);
  AddSubscription(list, given_);
  AddCount(list, given_, "show at most N dead letters");
  list->add_flag("--json", given_.json, "one JSON document instead of a table");

  CLI::App* replay =
      Add(dlq, "replay", "move dead letters back onto the source stream", CommandKind::kDlqReplay);
  commands_.back().synopsis +=
      " [-c FILE] --subscription NAME [--count N] [--id ID ...] [--dry-run]";
  replay->footer(
      "Moves dead letters back onto the source stream (original fields only) and deletes them\n"
      "from the dead-letter stream, one entry at a time: the dead letter is deleted only after\n"
      "its copy was added (one script per entry). An id given twice is replayed once.");
  AddConfig(replay, given_);
  AddSubscription(replay, given_);
  AddCount(replay, given_, "replay at most N dead letters");
  replay->add_option("--id", given_.ids, "replay only these dead letters (ids of the DLQ stream)")
      ->type_name("ID")
      ->check(Check([](std::string& v) -> std::string {
        return ParseEntryId(v)
                   ? ""
                   : "needs an entry id like 1700000000000-0 (got \"" + PrintableOneLine(v) + "\")";
      }));
  replay->add_flag("--dry-run", given_.dry_run, "print what would be replayed; change nothing");
}

void CommandLine::DefineLogCommands() {
  CLI::App* produce =
      Add(root_.get(), "produce", "append one entry and print its id", CommandKind::kProduce);
  commands_.back().synopsis +=
      " [-c FILE] STREAM FIELD=VALUE ... [--idempotency-key K] [--id ID] [--key KEY]";
  produce->footer(
      "Appends one entry to STREAM and prints its id (the receipt). Each FIELD=VALUE is one\n"
      "field, in order; the value is everything after the first '='. A stream listed under\n"
      "`streams:` uses its max_len and notify settings; one with produce: false is refused.\n"
      "After --, every argument is a FIELD=VALUE, even one starting with -.");
  AddConfig(produce, given_);
  produce->add_option("STREAM", given_.stream, "the stream key")
      ->required()
      ->check(NotEmpty("a stream name"));
  produce->add_option("FIELD=VALUE", given_.fields, "the entry's fields, in order")
      ->required()
      ->check(FieldValue());
  produce
      ->add_option("--idempotency-key", given_.idempotency_key,
                   "a repeat of K within api.idempotency_ttl appends nothing and prints the "
                   "first append's id")
      ->type_name("K")
      ->check(NotEmpty("a key"));
  produce
      ->add_option("--id", given_.entry_id,
                   "append with exactly this id (<ms>-<seq>); an id not above the stream's top "
                   "fails (exit 1)")
      ->type_name("ID")
      ->check(EntryId());
  produce
      ->add_option("--key", given_.key,
                   "the shard KEY goes to, for a stream a sharded subscription reads (required "
                   "there)")
      ->type_name("KEY")
      ->check(NotEmpty("the entry's key"));

  CLI::App* read = Add(root_.get(), "read", "entries in [since, until), archive and live merged",
                       CommandKind::kRead);
  commands_.back().synopsis += " [-c FILE] STREAM [--since T] [--until T] [--count N] [--json]";
  read->footer(
      "Prints the entries of STREAM in [since, until), oldest first: archived entries (a stream\n"
      "with archive: true) and the live stream merged, with no gap and no duplicate. T is an\n"
      "RFC 3339 instant (2026-11-30T14:30:00Z), milliseconds since the epoch or an entry id.\n"
      "One line per entry (id, time, fields), or with --json one document\n"
      "{\"stream\",\"entries\",\"next\"}, the entries as the log API encodes them.");
  AddConfig(read, given_);
  read->add_option("STREAM", given_.stream, "the stream key")
      ->required()
      ->check(NotEmpty("a stream name"));
  read->add_option("--since", given_.since, "from T (included)")
      ->type_name("T")
      ->transform(Bound());
  read->add_option("--until", given_.until, "up to T (excluded)")
      ->type_name("T")
      ->transform(Bound());
  AddCount(read, given_, "print at most N entries (default 100)");
  read->add_flag("--json", given_.json, "one JSON document");

  CLI::App* tail =
      Add(root_.get(), "tail", "follow new entries until interrupted", CommandKind::kTail);
  commands_.back().synopsis += " [-c FILE] STREAM [--since T] [--json]";
  tail->footer(
      "Prints new entries of STREAM as they are appended, until SIGINT or SIGTERM (exit 0).\n"
      "--since T starts at T (archived entries included) instead of now.");
  AddConfig(tail, given_);
  tail->add_option("STREAM", given_.stream, "the stream key")
      ->required()
      ->check(NotEmpty("a stream name"));
  tail->add_option("--since", given_.since,
                   "start at T: an RFC 3339 instant, milliseconds or an "
                   "entry id")
      ->type_name("T")
      ->transform(Bound());
  tail->add_flag("--json", given_.json, "one entry per line as JSON");
}

void CommandLine::DefineTrimAndRoute() {
  CLI::App* route = Add(root_.get(), "route", "the shard KEY goes to (sharded subscriptions)",
                        CommandKind::kRoute);
  commands_.back().synopsis += " [-c FILE] --subscription NAME KEY";
  route->footer(
      "Prints the shard of the sharded subscription NAME that a producer puts KEY in, and that\n"
      "shard's stream key: \"<index> <key>\", for example \"3 orders:{3}\". The index is\n"
      "crc32(KEY) mod shards (CRC-32/IEEE, as zlib's crc32), so producers in any language route\n"
      "alike. Reads only the configuration. A KEY starting with - follows --.");
  AddConfig(route, given_);
  AddSubscription(route, given_);
  route->add_option("KEY", given_.key, "the entry's key")->required();

  CLI::App* trim = Add(root_.get(), "trim", "trim a stream now (archived streams folded first)",
                       CommandKind::kTrim);
  commands_.back().synopsis +=
      " [-c FILE] STREAM [--max-len N | --max-age D | --min-id ID] [--dry-run]";
  trim->footer(
      "Trims STREAM now, exactly (no ~); STREAM must be listed under `streams:`. Give exactly\n"
      "one of --max-len, --max-age and --min-id. A stream with archive: true is folded into the\n"
      "archive first, under the same lease as the retention beat (waiting up to 60 s for a beat\n"
      "in progress), and trimmed only at or below what was folded: `streamcar read` still\n"
      "returns every entry. Prints one line:\n"
      "  folded N entries (K new) up to W into URL; trimmed M entries (STREAM: L left)\n"
      "  trimmed M entries (STREAM: L left)                    (a stream without archive)\n"
      "and with --dry-run the same with \"would fold\", \"would trim\" and \"would be left\".");
  AddConfig(trim, given_);
  trim->add_option("STREAM", given_.stream, "the stream key")
      ->required()
      ->check(NotEmpty("a stream name"));
  trim->add_option("--max-len", given_.max_len, "keep the newest N entries")
      ->type_name("N")
      ->check(WholeNumber(0));
  trim->add_option("--max-age", given_.max_age,
                   "keep the entries younger than D (1h, 30m, 1h30m), by Redis's clock")
      ->type_name("D")
      ->check(Duration());
  trim->add_option("--min-id", given_.min_id,
                   "keep the entries at or above ID (an entry id, milliseconds or an RFC 3339 "
                   "instant)")
      ->type_name("ID")
      ->transform(Bound());
  trim->add_flag("--dry-run", given_.dry_run,
                 "print what would be folded and trimmed; change nothing");
}

void CommandLine::DefineToolCommands() {
  CLI::App* completion = Add(root_.get(), "completion", "a shell completion script on stdout",
                             CommandKind::kCompletion);
  commands_.back().synopsis += " bash|zsh";
  completion->footer(
      "bash: streamcar completion bash > /etc/bash_completion.d/streamcar (or source it).\n"
      "zsh:  streamcar completion zsh > \"${fpath[1]}/_streamcar\" (then compinit).");
  std::vector<std::string> shells = {"bash", "zsh"};
  CLI::Option* shell = completion->add_option("SHELL", given_.shell, "bash or zsh")
                           ->required()
                           ->check(Check([shells](std::string& v) -> std::string {
                             for (const std::string& each : shells) {
                               if (v == each) return std::string();
                             }
                             return "must be bash or zsh (got \"" + PrintableOneLine(v) + "\")";
                           }));
  choices_[shell] = shells;

  CLI::App* version = Add(root_.get(), "version", "print the version, revision and build date",
                          CommandKind::kVersion);
  commands_.back().synopsis += " (or streamcar --version)";
  version->footer("Prints the version, the source revision and the build date.");

  CLI::App* help = Add(root_.get(), "help", "help for COMMAND, as COMMAND --help", std::nullopt);
  commands_.back().synopsis += " [COMMAND [SUBCOMMAND]]";
  help->add_option("COMMAND", given_.help_topic, "the command");

  // The man page's source; hidden (an empty group) from help and completion, since only the
  // image build and the release call it.
  CLI::App* man = Add(root_.get(), "man", "the man page (roff) on stdout", CommandKind::kMan);
  man->group("");
}

}  // namespace streamcar::cli
