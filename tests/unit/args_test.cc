// The command line of SPEC section 1 on CLI11 (sidecar/cli/command_line.cc): every command,
// missing and extra arguments, help, version, typos.

#include "sidecar/cli/args.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace streamcar::cli {
namespace {

Arguments Parse(const std::vector<std::string>& args) {
  std::string error;
  auto parsed = ParseArguments(args, &error);
  EXPECT_TRUE(parsed.has_value()) << error;
  return parsed.value_or(Arguments{});
}

std::string ErrorOf(const std::vector<std::string>& args) {
  std::string error;
  EXPECT_FALSE(ParseArguments(args, &error).has_value());
  return error;
}

TEST(Args, RunIsTheDefault) {
  ::unsetenv("STREAMCAR_CONFIG");
  auto a = Parse({});
  EXPECT_EQ(a.command, CommandKind::kRun);
  EXPECT_EQ(a.config_path, "/etc/streamcar/streamcar.yaml");
}

TEST(Args, ConfigFromFlagThenEnv) {
  ::setenv("STREAMCAR_CONFIG", "/from/env.yaml", 1);
  EXPECT_EQ(Parse({"check"}).config_path, "/from/env.yaml");
  EXPECT_EQ(Parse({"check", "-c", "/x.yaml"}).config_path, "/x.yaml");
  EXPECT_EQ(Parse({"check", "--config", "/y.yaml"}).config_path, "/y.yaml");
  EXPECT_EQ(Parse({"check", "--config=/z.yaml"}).config_path, "/z.yaml");
  ::unsetenv("STREAMCAR_CONFIG");
}

TEST(Args, EveryCommand) {
  EXPECT_EQ(Parse({"version"}).command, CommandKind::kVersion);
  // SPEC 1: --version is the version command (not a usage error).
  EXPECT_EQ(Parse({"--version"}).command, CommandKind::kVersion);
  EXPECT_EQ(Parse({"run"}).command, CommandKind::kRun);
  EXPECT_EQ(Parse({"-c", "/x.yaml"}).command, CommandKind::kRun) << "options first: run";
  EXPECT_EQ(Parse({"-c", "/x.yaml"}).config_path, "/x.yaml");
  EXPECT_EQ(Parse({"check"}).command, CommandKind::kCheck);
  EXPECT_EQ(Parse({"status"}).command, CommandKind::kStatus);
  EXPECT_FALSE(Parse({"status"}).json);
  EXPECT_TRUE(Parse({"status", "--json"}).json);
  EXPECT_EQ(Parse({"completion", "bash"}).command, CommandKind::kCompletion);
  EXPECT_EQ(Parse({"completion", "zsh"}).shell, "zsh");
  EXPECT_EQ(Parse({"man"}).command, CommandKind::kMan);
  auto route = Parse({"route", "--subscription", "orders/billing", "k1"});
  EXPECT_EQ(route.command, CommandKind::kRoute);
  EXPECT_EQ(route.key, "k1");
  EXPECT_TRUE(route.key_given);
  EXPECT_EQ(Parse({"route", "--subscription", "s", "--", "-x"}).key, "-x");
  EXPECT_TRUE(Parse({"route", "--subscription", "s", ""}).key_given) << "an empty key is a key";
  auto list = Parse({"dlq", "list", "--subscription", "orders/billing", "--count", "5", "--json"});
  EXPECT_EQ(list.command, CommandKind::kDlqList);
  EXPECT_EQ(list.subscription, "orders/billing");
  EXPECT_EQ(list.count, 5);
  auto replay =
      Parse({"dlq", "replay", "--subscription", "s", "--id", "1-0", "--id", "2-0", "--dry-run"});
  EXPECT_EQ(replay.command, CommandKind::kDlqReplay);
  EXPECT_EQ(replay.ids, (std::vector<std::string>{"1-0", "2-0"}));
  EXPECT_TRUE(replay.dry_run);
}

TEST(Args, AnIdGivenTwiceIsKeptOnce) {
  auto replay = Parse({"dlq", "replay", "--subscription", "s", "--id", "2-0", "--id", "1-0",
                       "--id=2-0", "--id", "1-0", "--id", "3-0"});
  EXPECT_EQ(replay.ids, (std::vector<std::string>{"2-0", "1-0", "3-0"}));
}

TEST(Args, HelpOnEveryCommand) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"--help"},
                                                                {"run", "--help"},
                                                                {"check", "-h"},
                                                                {"status", "--help"},
                                                                {"dlq", "list", "--help"},
                                                                {"dlq", "replay", "--help"},
                                                                {"produce", "--help"},
                                                                {"read", "--help"},
                                                                {"tail", "--help"},
                                                                {"trim", "--help"},
                                                                {"version", "--help"}}) {
    const Arguments a = Parse(args);
    EXPECT_EQ(a.help_text.rfind("Usage: streamcar", 0), 0u) << a.help_text;
  }
  // Each command's help is its own: its synopsis of SPEC 1 and its options.
  EXPECT_NE(Parse({"dlq", "replay", "--help"})
                .help_text.find("Usage: streamcar dlq replay [-c FILE] --subscription NAME"),
            std::string::npos);
  EXPECT_NE(Parse({"dlq", "replay", "--help"}).help_text.find("--dry-run"), std::string::npos);
  EXPECT_NE(Parse({"dlq", "list", "--help"}).help_text.find("--json"), std::string::npos);
  EXPECT_EQ(Parse({"dlq", "list", "--help"}).help_text.find("--dry-run"), std::string::npos);
  // dlq's own help lists both subcommands; the general help every command, not the hidden man.
  const std::string dlq = Parse({"dlq", "--help"}).help_text;
  EXPECT_NE(dlq.find("\n  streamcar dlq list [-c FILE]"), std::string::npos) << dlq;
  EXPECT_NE(dlq.find("\n  streamcar dlq replay [-c FILE]"), std::string::npos) << dlq;
  const std::string general = Parse({"--help"}).help_text;
  for (const char* command : {"run", "check", "status", "dlq", "produce", "read", "tail", "route",
                              "trim", "completion", "version", "help"}) {
    EXPECT_NE(general.find("\n  streamcar " + std::string(command) + " "), std::string::npos)
        << command;
  }
  EXPECT_NE(general.find("\n  streamcar dlq replay [-c FILE]"), std::string::npos) << general;
  EXPECT_EQ(general.find("streamcar man"), std::string::npos);
  // --help wins over what is missing: a required option need not be given to read its help.
  EXPECT_FALSE(Parse({"dlq", "list", "--help"}).help_text.empty());
  EXPECT_FALSE(Parse({"trim", "--help"}).help_text.empty());
}

// SPEC 1: `help COMMAND` is the same as `COMMAND --help`, subcommands included.
TEST(Args, HelpCommandIsTheCommandsHelp) {
  for (auto [asked, same] :
       std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
           {{"help"}, {"--help"}},
           {{"help", "run"}, {"run", "--help"}},
           {{"help", "status"}, {"status", "--help"}},
           {{"help", "dlq"}, {"dlq", "--help"}},
           {{"help", "dlq", "replay"}, {"dlq", "replay", "--help"}},
           {{"help", "trim"}, {"trim", "--help"}},
           {{"help", "version"}, {"version", "--help"}}}) {
    const Arguments a = Parse(asked);
    const Arguments b = Parse(same);
    EXPECT_FALSE(a.help_text.empty()) << asked.size();
    EXPECT_EQ(a.help_text, b.help_text) << asked.back();
  }
  EXPECT_NE(ErrorOf({"help", "chek"}).find("did you mean 'check'?"), std::string::npos);
}

TEST(Args, Errors) {
  EXPECT_EQ(ErrorOf({"stauts"}),
            "unknown command 'stauts'; did you mean 'status'? (see streamcar --help)");
  EXPECT_NE(ErrorOf({"chek"}).find("did you mean 'check'?"), std::string::npos);
  EXPECT_NE(ErrorOf({"zzzzzz"}).find("the commands are run, check, status"), std::string::npos);
  EXPECT_EQ(ErrorOf({"man2"}).find("'man'"), std::string::npos) << "man is hidden";
  EXPECT_EQ(ErrorOf({"run", "--json"}),
            "option --json does not apply to 'run' (see streamcar run --help)");
  EXPECT_NE(ErrorOf({"run", "-c"}).find("-c"), std::string::npos);
  EXPECT_NE(ErrorOf({"run", "-c", ""}).find("needs a file path"), std::string::npos);
  EXPECT_NE(ErrorOf({"dlq"}).find("dlq needs a command: list or replay"), std::string::npos);
  EXPECT_NE(ErrorOf({"dlq", "purge"}).find("unknown dlq command 'purge'"), std::string::npos);
  EXPECT_NE(ErrorOf({"dlq", "lst"}).find("did you mean 'list'?"), std::string::npos);
  EXPECT_EQ(ErrorOf({"dlq", "list"}),
            "dlq list: --subscription is required (see streamcar dlq list --help)");
  // A misspelt option is named before the required one it was probably meant to be.
  EXPECT_NE(ErrorOf({"dlq", "list", "--subscriptin", "s"})
                .find("unknown option '--subscriptin' for 'dlq list'; did you mean "
                      "'--subscription'?"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"status", "--jsn"}).find("did you mean '--json'?"), std::string::npos);
  EXPECT_NE(ErrorOf({"completion"}).find("SHELL is required"), std::string::npos);
  EXPECT_NE(ErrorOf({"completion", "fish"}).find("must be bash or zsh"), std::string::npos);
  EXPECT_NE(ErrorOf({"completion", "bash", "zsh"}).find("unexpected argument 'zsh'"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"version", "extra"}).find("unexpected argument"), std::string::npos);
  EXPECT_NE(ErrorOf({"route", "--subscription", "s"}).find("KEY is required"), std::string::npos);
  EXPECT_NE(ErrorOf({"route", "k"}).find("--subscription is required"), std::string::npos);
  EXPECT_NE(ErrorOf({"status", "--json", "--config"}).find("--config"), std::string::npos);
  EXPECT_NE(ErrorOf({"dlq", "list", "--subscription", "s", "--count", "0"}).find("--count"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"dlq", "replay", "--subscription", "s", "--id", "nope"}).find("--id"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"status", "--bogus"}).find("unknown option '--bogus'"), std::string::npos);
  EXPECT_NE(ErrorOf({"check", "extra"}).find("unexpected argument"), std::string::npos);
}

TEST(Args, ProduceReadTail) {
  auto produce = Parse(
      {"produce", "feed", "a=1", "b=x=y", "--idempotency-key", "k", "--id", "5-1", "--", "-c=2"});
  EXPECT_EQ(produce.command, CommandKind::kProduce);
  EXPECT_EQ(produce.stream, "feed");
  using Fields = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(produce.fields, (Fields{{"a", "1"}, {"b", "x=y"}, {"-c", "2"}}));
  EXPECT_EQ(produce.idempotency_key, "k");
  EXPECT_EQ(produce.entry_id, "5-1");
  auto read = Parse({"read", "-c", "/x.yaml", "feed", "--since", "2026-11-30T14:30:00Z",
                     "--until=1796049120000", "--count", "5", "--json"});
  EXPECT_EQ(read.command, CommandKind::kRead);
  EXPECT_EQ(read.stream, "feed");
  EXPECT_EQ(read.since, "1796049000000-0");
  EXPECT_EQ(read.until, "1796049120000-0");
  EXPECT_EQ(read.count, 5);
  EXPECT_TRUE(read.json);
  auto tail = Parse({"tail", "feed", "--since", "17-3"});
  EXPECT_EQ(tail.command, CommandKind::kTail);
  EXPECT_EQ(tail.since, "17-3");
  EXPECT_TRUE(Parse({"tail", "feed", "--json"}).json);
}

TEST(Args, ProduceReadTailErrors) {
  EXPECT_NE(ErrorOf({"produce"}).find("STREAM is required"), std::string::npos);
  EXPECT_NE(ErrorOf({"produce", ""}).find("needs a stream name"), std::string::npos);
  EXPECT_NE(ErrorOf({"produce", "feed", "a=1", "--", "-x"}).find("\"-x\" is not FIELD=VALUE"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"read", "feed", "--", "more"}).find("unexpected argument 'more'"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"dlq", "list", "--subscription", "s", "--", "x"})
                .find("unexpected argument 'x' for 'dlq list'"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"produce", "feed"}).find("FIELD=VALUE is required"), std::string::npos);
  EXPECT_NE(ErrorOf({"produce", "feed", "a=1", "--id", "1-0", "--id", "2-0"}).find("--id"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"produce", "feed", "novalue"}).find("is not FIELD=VALUE"), std::string::npos);
  EXPECT_NE(ErrorOf({"produce", "feed", "=v"}).find("is not FIELD=VALUE"), std::string::npos);
  EXPECT_NE(ErrorOf({"produce", "feed", "a=1", "--id", "5"}).find("--id"), std::string::npos);
  EXPECT_NE(ErrorOf({"produce", "feed", "a=1", "--since", "5"}).find("does not apply"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"read", "feed", "extra"}).find("unexpected argument"), std::string::npos);
  EXPECT_NE(ErrorOf({"read", "feed", "--since", "noon"}).find("--since: \"noon\" is not a valid"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"tail", "feed", "--until", "5"}).find("does not apply"), std::string::npos);
  EXPECT_NE(ErrorOf({"tail", "feed", "--count", "5"}).find("does not apply"), std::string::npos);
  EXPECT_NE(ErrorOf({"reed"}).find("did you mean 'read'?"), std::string::npos);
}

// SPEC 1: `trim STREAM [--max-len N | --max-age D | --min-id ID] [--dry-run]`.
TEST(Args, TrimTakesExactlyOneSelector) {
  auto by_len = Parse({"trim", "-c", "/x.yaml", "feed", "--max-len", "0", "--dry-run"});
  EXPECT_EQ(by_len.command, CommandKind::kTrim);
  EXPECT_EQ(by_len.stream, "feed");
  EXPECT_EQ(by_len.max_len, 0);
  EXPECT_FALSE(by_len.max_age.has_value());
  EXPECT_TRUE(by_len.dry_run);
  auto by_age = Parse({"trim", "feed", "--max-age=1h30m"});
  EXPECT_EQ(by_age.max_age, Millis(90 * 60 * 1000));
  EXPECT_FALSE(by_age.max_len.has_value());
  EXPECT_FALSE(by_age.dry_run);
  EXPECT_EQ(Parse({"trim", "feed", "--min-id", "17-3"}).min_id, "17-3");
  EXPECT_EQ(Parse({"trim", "feed", "--min-id", "1796049000000"}).min_id, "1796049000000-0");
  EXPECT_EQ(Parse({"trim", "feed", "--min-id", "2026-11-30T14:30:00Z"}).min_id, "1796049000000-0");

  EXPECT_NE(ErrorOf({"trim", "feed"}).find("needs one of --max-len N, --max-age D or --min-id ID"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"trim", "feed", "--max-len", "1", "--min-id", "1-0"}).find("exactly one"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"trim", "feed", "--max-age", "1h", "--max-age", "2h"}).find("--max-age"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"trim", "--max-len", "1"}).find("STREAM is required"), std::string::npos);
  for (const char* bad : {"-1", "x", "1.5", ""}) {
    EXPECT_NE(ErrorOf({"trim", "feed", "--max-len", bad}).find("--max-len: must be a whole number"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(ErrorOf({"trim", "feed", "--max-age", "5"}).find("--max-age: needs a duration"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"trim", "feed", "--min-id", "noon"}).find("--min-id: \"noon\""),
            std::string::npos);
  EXPECT_NE(ErrorOf({"trim", "feed", "--max-len", "1", "--count", "2"}).find("does not apply"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"read", "feed", "--max-len", "1"}).find("does not apply"), std::string::npos);
  EXPECT_NE(ErrorOf({"trm"}).find("did you mean 'trim'?"), std::string::npos);
}

}  // namespace
}  // namespace streamcar::cli
