#include "sidecar/cli/args.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "sidecar/cli/command_line.h"
#include "sidecar/common/duration.h"
#include "sidecar/common/text.h"

namespace streamcar::cli {
namespace {

bool IsHelpOrVersion(const std::string& arg) {
  return arg == "-h" || arg == "--help" || arg == "--version";
}

// SPEC 1's shorthands, as CLI11 would not read them: `help COMMAND ...` is `COMMAND ... --help`,
// and no command word (nothing, or options first) is `run`.
std::vector<std::string> Expand(const std::vector<std::string>& args) {
  std::vector<std::string> words = args;
  if (!words.empty() && words[0] == "help") {
    words.erase(words.begin());
    words.emplace_back("--help");
  }
  if (words.empty() || (words[0].starts_with("-") && !IsHelpOrVersion(words[0]))) {
    words.insert(words.begin(), "run");
  }
  return words;
}

std::vector<CLI::App*> Subcommands(CLI::App* app) {
  return app->get_subcommands([](CLI::App*) { return true; });
}

// The command the words name, walking the command words from the root: an unknown word, or a
// group (dlq) without its subcommand, is an error here, where it can name the choices (CLI11
// would only say that a subcommand is required).
CLI::App* SelectCommand(CommandLine& line, const std::vector<std::string>& words,
                        std::string* error) {
  CLI::App* app = &line.root();
  for (size_t i = 0; i < words.size() && !words[i].starts_with("-"); ++i) {
    const std::vector<CLI::App*> subs = Subcommands(app);
    if (subs.empty()) break;
    auto named = std::find_if(subs.begin(), subs.end(),
                              [&](const CLI::App* sub) { return sub->get_name() == words[i]; });
    if (named != subs.end()) {
      app = *named;
      continue;
    }
    std::vector<std::string_view> names;
    for (const CLI::App* sub : subs) {
      if (!sub->get_group().empty()) names.emplace_back(sub->get_name());
    }
    const std::string group = line.Find(app)->words;
    std::string message = "unknown " + (group.empty() ? "" : group + " ") + "command '" +
                          PrintableOneLine(words[i]) + "'";
    if (auto meant = ClosestMatch(words[i], names)) {
      message += "; did you mean '" + *meant + "'?";
    } else {
      std::string all;
      for (std::string_view name : names) all += (all.empty() ? "" : ", ") + std::string(name);
      message += "; the commands are " + all;
    }
    *error = message + " (see streamcar " + (group.empty() ? "" : group + " ") + "--help)";
    return nullptr;
  }
  const bool help_asked = std::any_of(
      words.begin(), words.end(), [](const std::string& w) { return w == "-h" || w == "--help"; });
  if (app != &line.root() && !Subcommands(app).empty() && !help_asked) {
    std::string names;
    for (const CLI::App* sub : Subcommands(app))
      names += (names.empty() ? "" : " or ") + sub->get_name();
    *error = line.Find(app)->words + " needs a command: " + names + " (see streamcar " +
             line.Find(app)->words + " --help)";
    return nullptr;
  }
  return app;
}

// Why an argument the command does not take is wrong: an option another command has, an
// option misspelt, or a positional too many.
std::string ExtraArgument(const CommandLine& line, const CLI::App* command,
                          const std::string& arg) {
  const std::string words = line.Find(command)->words;
  const std::string see = " (see streamcar " + words + " --help)";
  if (!arg.starts_with("-") || arg == "-") {
    return "unexpected argument '" + PrintableOneLine(arg) + "' for '" + words + "'" + see;
  }
  const std::string name = arg.substr(0, arg.find('='));
  for (const CommandInfo& other : line.commands()) {
    for (const CLI::Option* option : other.app->get_options()) {
      if (option->nonpositional() && option->check_name(name)) {
        return "option " + name + " does not apply to '" + words + "'" + see;
      }
    }
  }
  std::vector<std::string> known;
  for (const CLI::Option* option : command->get_options()) {
    for (const std::string& l : option->get_lnames()) known.push_back("--" + l);
  }
  std::string message = "unknown option '" + PrintableOneLine(name) + "' for '" + words + "'";
  if (auto meant = ClosestMatch(name, {known.begin(), known.end()})) {
    return message + "; did you mean '" + *meant + "'?" + see;
  }
  return message + see;
}

// The arguments the command did not take. CLI11 also records a "--" there when positionals
// follow it: that one was taken.
// What follows "--" once the command's positionals are satisfied CLI11 hands to the root: for
// produce more FIELD=VALUE, for any other command arguments too many.
std::vector<std::string> Extras(const CLI::App* command) {
  std::vector<std::string> extras = command->remaining();
  std::erase(extras, "--");
  if (command->get_name() != "produce") {
    for (const CLI::App* up = command->get_parent(); up != nullptr; up = up->get_parent()) {
      const std::vector<std::string> after_dashes = up->remaining();
      extras.insert(extras.end(), after_dashes.begin(), after_dashes.end());
    }
  }
  return extras;
}

// produce's FIELD=VALUE after "--", checked as those before it are.
bool TakeFieldsAfterDashes(const CLI::App& root, Given& given, std::string* error) {
  for (const std::string& field : root.remaining()) {
    const auto eq = field.find('=');
    if (eq == std::string::npos || eq == 0) {
      *error = "produce: FIELD=VALUE: \"" + PrintableOneLine(field) +
               "\" is not FIELD=VALUE (see streamcar produce --help)";
      return false;
    }
    given.fields.push_back(field);
  }
  return true;
}

// What CLI11 filled in, as Arguments; the checks no single option can make.
std::optional<Arguments> Convert(const CommandLine& line, const CLI::App* command,
                                 const Given& given, std::string* error) {
  Arguments parsed;
  if (!line.Find(command)->kind) {  // only `help` has none, and Expand rewrites it
    *error = "'" + line.Find(command)->words + "' is not a command to run";
    return std::nullopt;
  }
  parsed.command = *line.Find(command)->kind;
  auto given_option = [&](const std::string& name) {
    const CLI::Option* option = command->get_option_no_throw(name);
    return option != nullptr && option->count() > 0;
  };
  parsed.json = given.json;
  parsed.dry_run = given.dry_run;
  parsed.subscription = given.subscription;
  if (given_option("--count")) parsed.count = std::stol(given.count);
  for (const std::string& id : given.ids) {
    // An id given twice is replayed once (SPEC 3.3).
    if (std::find(parsed.ids.begin(), parsed.ids.end(), id) == parsed.ids.end()) {
      parsed.ids.push_back(id);
    }
  }
  parsed.stream = given.stream;
  for (const std::string& field : given.fields) {
    const auto eq = field.find('=');
    parsed.fields.emplace_back(field.substr(0, eq), field.substr(eq + 1));
  }
  parsed.idempotency_key = given.idempotency_key;
  parsed.entry_id = given.entry_id;
  parsed.since = given.since;
  parsed.until = given.until;
  parsed.key = given.key;
  parsed.key_given = given_option("KEY") || given_option("--key");
  parsed.shell = given.shell;
  if (parsed.command == CommandKind::kTrim) {
    const int points = static_cast<int>(given_option("--max-len")) +
                       static_cast<int>(given_option("--max-age")) +
                       static_cast<int>(given_option("--min-id"));
    if (points != 1) {
      *error = points == 0 ? "trim needs one of --max-len N, --max-age D or --min-id ID"
                           : "trim takes exactly one of --max-len, --max-age and --min-id";
      *error += " (see streamcar trim --help)";
      return std::nullopt;
    }
    if (given_option("--max-len")) parsed.max_len = std::stoll(given.max_len);
    std::string why;
    if (given_option("--max-age")) parsed.max_age = ParseDuration(given.max_age, &why);
    parsed.min_id = given.min_id;
  }
  if (const char* env = std::getenv("STREAMCAR_CONFIG"); !given.config.empty()) {
    parsed.config_path = given.config;
  } else if (env != nullptr && *env != '\0') {
    parsed.config_path = env;
  } else {
    parsed.config_path = kDefaultConfigPath;
  }
  return parsed;
}

}  // namespace

std::optional<Arguments> ParseArguments(const std::vector<std::string>& args, std::string* error) {
  CommandLine line;
  const std::vector<std::string> words = Expand(args);
  CLI::App* command = SelectCommand(line, words, error);
  if (command == nullptr) return std::nullopt;
  // Extras are collected, not thrown, so that the message can name the argument and what was
  // probably meant (CLI11 lists them all, without a suggestion).
  for (CLI::App* app = command; app != nullptr; app = app->get_parent()) app->allow_extras();
  try {
    line.root().parse(std::vector<std::string>(words.rbegin(), words.rend()));
  } catch (const CLI::CallForHelp&) {
    Arguments help;
    help.help_text = line.root().help();
    return help;
  } catch (const CLI::CallForVersion&) {
    return Arguments{.command = CommandKind::kVersion};
  } catch (const CLI::ParseError& e) {
    // A misspelt option is the likelier cause of "--subscription is required", so it comes first.
    if (const auto extras = Extras(command); !extras.empty()) {
      *error = ExtraArgument(line, command, extras.front());
    } else {
      const std::string& words_of = line.Find(command)->words;
      *error = (words_of.empty() ? "" : words_of + ": ") + e.what() + " (see streamcar " +
               (words_of.empty() ? "" : words_of + " ") + "--help)";
    }
    return std::nullopt;
  }
  if (const auto extras = Extras(command); !extras.empty()) {
    *error = ExtraArgument(line, command, extras.front());
    return std::nullopt;
  }
  if (command->get_name() == "produce" &&
      !TakeFieldsAfterDashes(line.root(), line.given(), error)) {
    return std::nullopt;
  }
  return Convert(line, command, line.given(), error);
}

}  // namespace streamcar::cli
