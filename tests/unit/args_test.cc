#include "sidecar/cli/args.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace streamcar::cli {
namespace {

Arguments Parse(std::vector<std::string> args) {
  std::string error;
  auto parsed = ParseArguments(args, &error);
  EXPECT_TRUE(parsed.has_value()) << error;
  return parsed.value_or(Arguments{});
}

std::string ErrorOf(std::vector<std::string> args) {
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
  EXPECT_TRUE(Parse({"--version"}).command_given);
  EXPECT_TRUE(Parse({"--version", "--help"}).help);
  EXPECT_TRUE(Parse({"status", "--json"}).json);
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
  for (auto args : std::vector<std::vector<std::string>>{{"--help"},
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
    EXPECT_TRUE(Parse(args).help);
  }
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
    EXPECT_TRUE(a.help) << asked.size();
    EXPECT_EQ(a.command, b.command) << asked.back();
    EXPECT_EQ(a.command_given, b.command_given) << asked.back();
  }
  EXPECT_NE(ErrorOf({"help", "chek"}).find("did you mean check?"), std::string::npos);
}

TEST(Args, Errors) {
  EXPECT_NE(ErrorOf({"chek"}).find("did you mean check?"), std::string::npos);
  EXPECT_NE(ErrorOf({"run", "--json"}).find("does not apply"), std::string::npos);
  EXPECT_NE(ErrorOf({"run", "-c"}).find("needs a file path"), std::string::npos);
  EXPECT_NE(ErrorOf({"dlq"}).find("list or replay"), std::string::npos);
  EXPECT_NE(ErrorOf({"dlq", "purge"}).find("unknown dlq subcommand"), std::string::npos);
  EXPECT_NE(ErrorOf({"dlq", "list"}).find("--subscription"), std::string::npos);
  EXPECT_NE(ErrorOf({"dlq", "list", "--subscription", "s", "--count", "0"}).find("--count"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"dlq", "replay", "--subscription", "s", "--id", "nope"}).find("--id"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"status", "--bogus"}).find("unknown option --bogus"), std::string::npos);
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
  EXPECT_TRUE(Parse({"produce", "--help"}).help);
  EXPECT_TRUE(Parse({"read", "-h"}).help);
  EXPECT_TRUE(Parse({"tail", "--help"}).help);
}

TEST(Args, ProduceReadTailErrors) {
  EXPECT_NE(ErrorOf({"produce"}).find("needs a STREAM"), std::string::npos);
  EXPECT_NE(ErrorOf({"produce", "feed"}).find("at least one FIELD=VALUE"), std::string::npos);
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
  EXPECT_NE(ErrorOf({"reed"}).find("did you mean read?"), std::string::npos);
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
  EXPECT_NE(ErrorOf({"trim", "feed", "--max-age", "1h", "--max-age", "2h"}).find("exactly one"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"trim", "--max-len", "1"}).find("needs a STREAM"), std::string::npos);
  for (const char* bad : {"-1", "x", "1.5", ""}) {
    EXPECT_NE(ErrorOf({"trim", "feed", "--max-len", bad}).find("--max-len must be a whole number"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(ErrorOf({"trim", "feed", "--max-age", "5"}).find("--max-age needs a duration"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"trim", "feed", "--min-id", "noon"}).find("--min-id: \"noon\""),
            std::string::npos);
  EXPECT_NE(ErrorOf({"trim", "feed", "--max-len", "1", "--count", "2"}).find("does not apply"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"read", "feed", "--max-len", "1"}).find("does not apply"), std::string::npos);
  EXPECT_NE(ErrorOf({"trm"}).find("did you mean trim?"), std::string::npos);
}

}  // namespace
}  // namespace streamcar::cli
