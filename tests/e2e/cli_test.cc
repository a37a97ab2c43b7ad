// The command line of SPEC section 1 against the binary: exit codes, messages, check output,
// fatal errors, status and the dead-letter tools.

#include <httplib.h>
#include <rapidjson/document.h>

#include <fstream>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

class CliTest : public E2eTest {};

TEST_F(CliTest, VersionAndHelp) {
  auto version = RunStreamcar({"version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("streamcar ", 0), 0u);
  EXPECT_NE(version.out.find(" (revision "), std::string::npos) << version.out;
  EXPECT_NE(version.out.find(", built 20"), std::string::npos) << version.out;
  auto flag = RunStreamcar({"--version"});
  EXPECT_EQ(flag.exit_code, 0);
  EXPECT_EQ(flag.out, version.out);
  auto dlq = RunStreamcar({"dlq", "--help"});
  EXPECT_EQ(dlq.exit_code, 0);
  EXPECT_NE(dlq.out.find("replay"), std::string::npos) << dlq.out;
  for (auto args : std::vector<std::vector<std::string>>{{"--help"},
                                                         {"run", "--help"},
                                                         {"check", "--help"},
                                                         {"status", "--help"},
                                                         {"dlq", "list", "--help"},
                                                         {"dlq", "replay", "--help"},
                                                         {"route", "--help"},
                                                         {"version", "--help"}}) {
    auto help = RunStreamcar(args);
    EXPECT_EQ(help.exit_code, 0) << args[0];
    EXPECT_NE(help.out.find("Usage"), std::string::npos) << args[0];
  }
}

// SPEC 1: `help COMMAND` prints what `COMMAND --help` prints, subcommands included.
TEST_F(CliTest, HelpCommandPrintsTheCommandsHelp) {
  for (auto args : std::vector<std::vector<std::string>>{{"run"},
                                                         {"check"},
                                                         {"dlq"},
                                                         {"dlq", "list"},
                                                         {"dlq", "replay"},
                                                         {"completion"},
                                                         {"version"}}) {
    std::vector<std::string> asked{"help"};
    asked.insert(asked.end(), args.begin(), args.end());
    args.emplace_back("--help");
    auto help = RunStreamcar(asked);
    auto same = RunStreamcar(args);
    EXPECT_EQ(help.exit_code, 0) << args[0];
    EXPECT_NE(help.out.find("Usage"), std::string::npos) << args[0];
    EXPECT_EQ(help.out, same.out) << args[0];
  }
}

// An unknown STREAMCAR_LOG_LEVEL is a configuration error (exit 2, one line naming it), not a
// silent "info".
TEST_F(CliTest, AnUnknownLogLevelExitsTwoNamingIt) {
  std::string path = WriteConfig(Yaml({}));
  auto result = RunStreamcar({"run", "-c", path}, {"STREAMCAR_LOG_LEVEL=verbose"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_NE(result.err.find("STREAMCAR_LOG_LEVEL: unknown level \"verbose\""), std::string::npos)
      << result.err;
}

// The file's log.level (SPEC 2) wins over STREAMCAR_LOG_LEVEL, which is the level of a file
// without the key; `check` prints the level in force, and an unknown one exits 2 naming the key.
TEST_F(CliTest, TheFilesLogLevelWinsOverTheVariable) {
  SidecarConfig c;
  const std::string plain = WriteConfig(Yaml(c));
  auto from_env = RunStreamcar({"check", "-c", plain}, {"STREAMCAR_LOG_LEVEL=warn"});
  EXPECT_EQ(from_env.exit_code, 0) << from_env.err;
  EXPECT_NE(from_env.out.find("\nlog:\n  level: warn\n"), std::string::npos) << from_env.out;

  c.top_extra = "log:\n  level: debug\n";
  const std::string keyed = WriteConfig(Yaml(c));
  auto from_key = RunStreamcar({"check", "-c", keyed}, {"STREAMCAR_LOG_LEVEL=error"});
  EXPECT_EQ(from_key.exit_code, 0) << from_key.err;
  EXPECT_NE(from_key.out.find("\nlog:\n  level: debug\n"), std::string::npos) << from_key.out;

  c.top_extra = "log:\n  level: verbose\n";
  const std::string unknown = WriteConfig(Yaml(c));
  for (const char* command : {"check", "run"}) {
    auto result = RunStreamcar({command, "-c", unknown});
    EXPECT_EQ(result.exit_code, 2) << command;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_NE(
        result.err.find("log.level: unknown level \"verbose\" (use debug, info, warn or error)"),
        std::string::npos)
        << result.err;
  }
}

// `run` takes the file's level before its first line: at `error` from the variable, the key's
// `info` still shows the start lines.
TEST_F(CliTest, RunLogsAtTheFilesLevelFromTheStart) {
  SidecarConfig c;
  c.top_extra = "log:\n  level: info\n";
  auto sidecar = StartSidecar(c, {"STREAMCAR_LOG_LEVEL=error"});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  EXPECT_TRUE(Eventually(
      [&] { return sidecar->Logs().find("\"msg\":\"streamcar started\"") != std::string::npos; },
      seconds(5)))
      << sidecar->Logs();
}

// The completion scripts and the man page come from the binary (the image installs them so).
TEST_F(CliTest, CompletionAndManPage) {
  auto bash = RunStreamcar({"completion", "bash"});
  EXPECT_EQ(bash.exit_code, 0) << bash.err;
  EXPECT_NE(bash.out.find("complete -F _streamcar streamcar"), std::string::npos);
  auto zsh = RunStreamcar({"completion", "zsh"});
  EXPECT_EQ(zsh.exit_code, 0) << zsh.err;
  EXPECT_EQ(zsh.out.rfind("#compdef streamcar\n", 0), 0u);
  auto fish = RunStreamcar({"completion", "fish"});
  EXPECT_EQ(fish.exit_code, 2);
  EXPECT_NE(fish.err.find("must be bash or zsh"), std::string::npos) << fish.err;
  auto man = RunStreamcar({"man"});
  EXPECT_EQ(man.exit_code, 0) << man.err;
  EXPECT_NE(man.out.find(".TH STREAMCAR 1"), std::string::npos);
}

TEST_F(CliTest, ATypoIsNamedWithWhatWasMeant) {
  auto command = RunStreamcar({"stauts"});
  EXPECT_EQ(command.exit_code, 2);
  EXPECT_EQ(command.err,
            "streamcar: unknown command 'stauts'; did you mean 'status'? (see streamcar --help)\n");
  auto option = RunStreamcar({"dlq", "replay", "--subscription", "s", "--dryrun"});
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_NE(option.err.find("did you mean '--dry-run'?"), std::string::npos) << option.err;
}

// Every command that works reads STREAMCAR_LOG_LEVEL (they log), not only run.
TEST_F(CliTest, AnUnknownLogLevelStopsEveryWorkingCommand) {
  std::string path = WriteConfig(Yaml({}));
  for (auto args :
       std::vector<std::vector<std::string>>{{"check", "-c", path}, {"status", "-c", path}}) {
    auto result = RunStreamcar(args, {"STREAMCAR_LOG_LEVEL=loud"});
    EXPECT_EQ(result.exit_code, 2) << args[0];
    EXPECT_NE(result.err.find("STREAMCAR_LOG_LEVEL: unknown level \"loud\""), std::string::npos)
        << result.err;
  }
  auto version = RunStreamcar({"version"}, {"STREAMCAR_LOG_LEVEL=loud"});
  EXPECT_EQ(version.exit_code, 0) << "printing the version logs nothing";
}

TEST_F(CliTest, UsageErrorsExitTwoWithOneLine) {
  for (auto args : std::vector<std::vector<std::string>>{{"bogus"},
                                                         {"run", "--json"},
                                                         {"dlq"},
                                                         {"dlq", "list"},
                                                         {"status", "--count", "3"},
                                                         {"check", "extra"},
                                                         {"completion"},
                                                         {"version", "extra"}}) {
    auto result = RunStreamcar(args);
    EXPECT_EQ(result.exit_code, 2) << args[0];
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
}

TEST_F(CliTest, CheckPrintsTheEffectiveConfig) {
  std::string path = WriteConfig(Yaml({}));
  auto result = RunStreamcar({"check", "-c", path}, {"REDIS_PASSWORD=unused"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("max_attempts: 3"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("dead_letter:\n      stream: orders:dlq"), std::string::npos)
      << result.out;
}

TEST_F(CliTest, CheckUsesStreamcarConfigAndMasksThePassword) {
  SidecarConfig c;
  c.redis_extra = "  password: ${REDIS_PASSWORD}\n";
  std::string path = WriteConfig(c);
  auto result = RunStreamcar({"check"}, {"STREAMCAR_CONFIG=" + path, "REDIS_PASSWORD=hunter2"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.find("hunter2"), std::string::npos);
  EXPECT_NE(result.out.find("password: \"***\""), std::string::npos);
}

// Review F7 (issue 29): libpq takes passwords as URL parameters too, and check printed them.
// Every credential-like parameter's value is "***", the user info's password too; the rest of
// the URL is left as it is.
TEST_F(CliTest, CheckMasksPasswordParametersOfUrls) {
  struct Case {
    std::string url;
    std::string shown;
  };
  const Case cases[] = {
      {"postgres://bob:PGPASS-4@127.0.0.1:1/db?password=PGPASS-5",
       "postgres://bob:***@127.0.0.1:1/db?password=***"},
      {"postgresql://127.0.0.1:1/db?user=bob&password=PGPASS-7&sslpassword=PGPASS-8"
       "&oauth_client_secret=PGPASS-9&Pass%77ord=PGPASS-10&sslmode=disable",
       "postgresql://127.0.0.1:1/db?user=bob&password=***&sslpassword=***"
       "&oauth_client_secret=***&Pass%77ord=***&sslmode=disable"},
  };
  for (const Case& each : cases) {
    SidecarConfig c;
    c.top_extra =
        "streams: [ { name: feed, archive: true } ]\narchive: { url: \"" + each.url + "\" }\n";
    const std::string path = WriteConfig(c);
    auto result = RunStreamcar({"check", "-c", path});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(result.out.find("PGPASS"), std::string::npos) << result.out;
    EXPECT_NE(result.out.find(each.shown), std::string::npos) << result.out;
  }
}

TEST_F(CliTest, CheckRejectsBadConfigNamingTheKey) {
  std::string yaml = Yaml({});
  yaml.replace(yaml.find("max_attempts"), 12, "max_attemps");
  std::string path = WriteConfig(yaml);
  auto result = RunStreamcar({"check", "-c", path});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(path + ":"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(
                "subscriptions[0].retry.max_attemps: unknown key (did you mean max_attempts?)"),
            std::string::npos)
      << result.err;
  // run refuses the same file the same way.
  auto run = RunStreamcar({"run", "-c", path});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("max_attemps"), std::string::npos);
}

// SPEC 1 and 9: `route` prints the shard a key goes to, crc32(KEY) mod S, and the shard's key;
// `produce --key` appends there. 0xCBF43926 is the CRC-32 of "123456789": shard 6 of 16.
TEST_F(CliTest, RouteAndProduceSendAKeyToItsShard) {
  const std::string path = WriteConfig(
      "version: 1\nredis: { url: \"" + redis_->url() +
      "\" }\n"
      "subscriptions:\n"
      "  - { stream: orders, group: billing, start: beginning,\n"
      "      handler: { url: \"http://127.0.0.1:9/\" }, sharding: { shards: 16 } }\n"
      "  - { stream: plain, group: g, start: new, handler: { url: \"http://127.0.0.1:9/\" } }\n");
  auto routed =
      RunStreamcar({"route", "-c", path, "--subscription", "orders/billing", "123456789"});
  EXPECT_EQ(routed.exit_code, 0) << routed.err;
  EXPECT_EQ(routed.out, "6 orders:{6}\n");
  auto dashed = RunStreamcar({"route", "-c", path, "--subscription", "orders/billing", "--", "-x"});
  EXPECT_EQ(dashed.exit_code, 0) << dashed.err;

  for (const auto& args : std::vector<std::vector<std::string>>{
           {"route", "-c", path, "--subscription", "plain/g", "k"},
           {"route", "-c", path, "--subscription", "nobody", "k"},
           {"route", "-c", path, "--subscription", "orders/billing"},
           {"route", "-c", path, "k"}}) {
    auto refused = RunStreamcar(args);
    EXPECT_EQ(refused.exit_code, 2) << args[3];
    EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  }

  auto produced = RunStreamcar({"produce", "-c", path, "orders", "n=1", "--key", "123456789"});
  EXPECT_EQ(produced.exit_code, 0) << produced.err;
  EXPECT_EQ(redis_->Run({"XLEN", "orders:{6}"}).view().Integer(), 1);
  EXPECT_EQ(redis_->Run({"EXISTS", "orders"}).view().Integer(), 0) << "never the logical key";
  auto keyless = RunStreamcar({"produce", "-c", path, "orders", "n=1"});
  EXPECT_EQ(keyless.exit_code, 2);
  EXPECT_NE(keyless.err.find("--key"), std::string::npos) << keyless.err;
}

TEST_F(CliTest, MissingConfigFileExitsTwo) {
  auto result = RunStreamcar({"check", "-c", "/nonexistent/streamcar.yaml"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("/nonexistent/streamcar.yaml"), std::string::npos);
}

TEST_F(CliTest, WrongTypeStreamKeyExitsOneAndIsLeftUntouched) {
  redis_->Run({"SET", "orders", "precious"});
  auto sidecar = StartSidecar({});
  sidecar->ExpectExit(1);
  auto code = sidecar->Wait(seconds(10));
  ASSERT_TRUE(code.has_value()) << sidecar->Logs();
  EXPECT_EQ(*code, 1);
  EXPECT_NE(sidecar->Logs().find("WRONGTYPE"), std::string::npos) << sidecar->Logs();
  EXPECT_NE(sidecar->Logs().find("\\\"orders\\\""), std::string::npos) << sidecar->Logs();
  EXPECT_EQ(redis_->Run({"GET", "orders"}).view().Str(), "precious");
  EXPECT_EQ(redis_->Run({"TYPE", "orders"}).view().Str(), "string");
}

TEST_F(CliTest, WrongPasswordExitsOneWithoutTheSecretInAnyLog) {
  redis_ = std::make_unique<RedisServer>(RedisServerOptions{.password = "right-one"});
  SidecarConfig c;
  c.redis_extra = "  password: ${REDIS_PASSWORD}\n";
  auto sidecar = StartSidecar(c, {"REDIS_PASSWORD=wrong-secret-xyz"});
  sidecar->ExpectExit(1);
  auto code = sidecar->Wait(seconds(10));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  EXPECT_NE(sidecar->Logs().find("WRONGPASS"), std::string::npos) << sidecar->Logs();
  EXPECT_EQ(sidecar->Logs().find("wrong-secret-xyz"), std::string::npos) << sidecar->Logs();
}

TEST_F(CliTest, UnreachableRedisIsRetriedWhileNotReady) {
  SidecarConfig c;
  c.redis_url = "redis://127.0.0.1:" + std::to_string(FreePort()) + "/0";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(
      Eventually([&] { return HttpGet(admin_port_, "/readyz").first == 503; }, seconds(15)));
  // Retried, not given up: a second "unreachable" line comes, and the process is still alive.
  ASSERT_TRUE(Eventually(
      [&] {
        const std::string logs = sidecar->Logs();
        return logs.find("redis unreachable", logs.find("redis unreachable") + 1) !=
               std::string::npos;
      },
      seconds(20)))
      << sidecar->Logs();
  EXPECT_TRUE(sidecar->running());
  EXPECT_EQ(HttpGet(admin_port_, "/healthz").first, 200);
  EXPECT_EQ(HttpGet(admin_port_, "/readyz").first, 503);
}

TEST_F(CliTest, AdminServerAnswersOnlyGet) {
  auto sidecar = StartSidecar({});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  httplib::Client client("127.0.0.1", admin_port_);
  auto post = client.Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(HttpGet(admin_port_, "/nothing").first, 404);
}

}  // namespace
}  // namespace streamcar::testing
