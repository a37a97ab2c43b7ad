// SPEC 2, "Reload", with the real binary, a real redis-server and real handlers: a new handler
// url applied by SIGHUP while entries flow, and by a ConfigMap's atomic symlink swap without a
// signal; a new log level applied without touching delivery; a file that does not load changes
// nothing and is logged as `check` prints it; a key that cannot change live is refused with one
// line; SIGHUP never ends the process.

#include <rapidjson/document.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

namespace fs = std::filesystem;

class ReloadTest : public E2eTest {
 protected:
  // As an editor saving with a rename: the sidecar never reads half a file.
  static void WriteAtomically(const std::string& path, const std::string& yaml) {
    std::ofstream(path + ".tmp") << yaml;
    fs::rename(path + ".tmp", path);
  }

  // A Kubernetes ConfigMap volume's update (the kubelet's atomic writer): the file in a new
  // timestamped folder, `..data` renamed over to point at it, the old folder removed.
  static void SwapConfigMap(const std::string& dir, const std::string& stamp,
                            const std::string& yaml, const std::string& old_stamp) {
    fs::create_directory(dir + "/" + stamp);
    std::ofstream(dir + "/" + stamp + "/streamcar.yaml") << yaml;
    fs::create_symlink(stamp, dir + "/..data_tmp");
    fs::rename(dir + "/..data_tmp", dir + "/..data");
    if (!old_stamp.empty()) fs::remove_all(dir + "/" + old_stamp);
  }

  double Reloads(const std::string& result) {
    return Metric("streamcar_config_reloads_total", {"result=\"" + result + "\""});
  }

  // The log lines (JSON objects) whose msg starts with `prefix`.
  static std::vector<rapidjson::Document> LinesStartingWith(const std::string& logs,
                                                            const std::string& prefix) {
    std::vector<rapidjson::Document> out;
    std::istringstream in(logs);
    for (std::string line; std::getline(in, line);) {
      rapidjson::Document d;
      d.Parse(line.c_str());
      if (d.HasParseError() || !d.IsObject() || !d.HasMember("msg") || !d["msg"].IsString()) {
        continue;
      }
      if (std::string(d["msg"].GetString()).starts_with(prefix)) out.push_back(std::move(d));
    }
    return out;
  }

  // Every id delivered by one of the handlers, and nothing pending any more.
  bool AllAcknowledged(const std::vector<std::string>& ids, const TestHandler& other) {
    std::set<std::string> delivered;
    for (const auto& r : handler_.Requests()) delivered.insert(r.Header("streamcar-id"));
    for (const auto& r : other.Requests()) delivered.insert(r.Header("streamcar-id"));
    for (const auto& id : ids) {
      if (!delivered.contains(id)) return false;
    }
    return PendingCount() == 0;
  }

  static size_t RequestsFor(const TestHandler& handler, const std::string& id) {
    size_t n = 0;
    for (const auto& r : handler.Requests()) n += r.Header("streamcar-id") == id ? 1 : 0;
    return n;
  }
};

TEST_F(ReloadTest, ANewHandlerUrlBySighupWhileEntriesFlowLosesNone) {
  TestHandler second;
  handler_.SetBehaviour([](const ReceivedRequest&) {
    HandlerReply reply;
    reply.delay = milliseconds(100);  // requests are in flight when the reload comes
    return reply;
  });
  SidecarConfig c;
  c.handler_extra = "concurrency: 4";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(Add({"n", std::to_string(i)}));
  ASSERT_TRUE(handler_.WaitForCount(4, seconds(10))) << sidecar->Logs();

  c.handler_url = second.url("/");
  WriteAtomically(sidecar->config_path(), Yaml(c));
  ASSERT_EQ(::kill(sidecar->pid(), SIGHUP), 0);
  // Entries keep coming while the old loop drains and the new one starts, and for a while after.
  int during = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        ids.push_back(Add({"n", "during"}));
        return ++during >= 25 && Reloads("applied") == 1;
      },
      seconds(20)))
      << sidecar->Logs();
  std::vector<std::string> after;
  for (int i = 0; i < 20; ++i) after.push_back(Add({"n", "after"}));
  std::vector<std::string> all = ids;
  all.insert(all.end(), after.begin(), after.end());
  ASSERT_TRUE(Eventually([&] { return AllAcknowledged(all, second); }, seconds(30)))
      << sidecar->Logs();

  EXPECT_GT(handler_.Count(), 0u);
  for (const auto& id : after) {
    EXPECT_EQ(RequestsFor(handler_, id), 0u) << id;
    EXPECT_GE(RequestsFor(second, id), 1u) << id;
  }
  EXPECT_TRUE(sidecar->running());
  EXPECT_EQ(Reloads("applied"), 1);  // the watcher saw the same edit: one reload
  EXPECT_EQ(Reloads("refused"), 0);
  EXPECT_EQ(Reloads("invalid"), 0);
  auto lines = LinesStartingWith(sidecar->Logs(), "configuration reloaded");
  ASSERT_EQ(lines.size(), 1u) << sidecar->Logs();
  EXPECT_STREQ(lines[0]["keys"].GetString(), "subscriptions[0].handler.url");
  EXPECT_EQ(Len("orders:dlq"), 0);
}

// A reload waits for the requests in flight whatever shutdown.drain_timeout says: given up at a
// drain_timeout shorter than the handler's answer, they were sent again beside the first ones,
// and a second reload dead-lettered entries the handler had taken ("delivered 2 times without an
// outcome").
TEST_F(ReloadTest, RequestsInFlightOutlastingTheDrainTimeoutAreNeitherSentAgainNorDeadLettered) {
  handler_.SetBehaviour([](const ReceivedRequest&) {
    HandlerReply reply;
    reply.delay = milliseconds(2500);
    return reply;
  });
  SidecarConfig c;
  c.drain_timeout = "500ms";
  c.handler_extra = "timeout: 10s";
  c.max_attempts = 2;
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Add({"n", std::to_string(i)}));
  ASSERT_TRUE(handler_.WaitForCount(3, seconds(10))) << sidecar->Logs();

  // Two live edits, the second while the first's new loop runs.
  c.initial_backoff = "60ms";
  WriteAtomically(sidecar->config_path(), Yaml(c));
  ASSERT_EQ(::kill(sidecar->pid(), SIGHUP), 0);
  ASSERT_TRUE(Eventually([&] { return Reloads("applied") == 1; }, seconds(20))) << sidecar->Logs();
  c.initial_backoff = "70ms";
  WriteAtomically(sidecar->config_path(), Yaml(c));
  ASSERT_EQ(::kill(sidecar->pid(), SIGHUP), 0);
  ASSERT_TRUE(Eventually([&] { return Reloads("applied") == 2; }, seconds(20))) << sidecar->Logs();

  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(20))) << sidecar->Logs();
  for (const auto& id : ids) EXPECT_EQ(RequestsFor(handler_, id), 1u) << id;
  EXPECT_EQ(Len("orders:dlq"), 0) << sidecar->Logs();
  EXPECT_TRUE(sidecar->running());
}

TEST_F(ReloadTest, AConfigMapSymlinkSwapIsAppliedWithoutASignalAndWatchedAfter) {
  TestHandler second;
  SidecarConfig c;
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  const std::string dir = fs::path(sidecar->config_path()).parent_path().string();
  // The mounted layout: streamcar.yaml -> ..data/streamcar.yaml, ..data -> ..2026_1. The same
  // text as before: nothing to reload.
  SwapConfigMap(dir, "..2026_1", Yaml(c), "");
  fs::create_symlink("..data/streamcar.yaml", dir + "/streamcar.yaml.link");
  fs::rename(dir + "/streamcar.yaml.link", sidecar->config_path());
  const std::string before = Add({"n", "before"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();

  c.handler_url = second.url("/");
  SwapConfigMap(dir, "..2026_2", Yaml(c), "..2026_1");
  ASSERT_TRUE(Eventually([&] { return Reloads("applied") == 1; }, seconds(20))) << sidecar->Logs();
  std::vector<std::string> to_second;
  for (int i = 0; i < 10; ++i) to_second.push_back(Add({"n", std::to_string(i)}));
  ASSERT_TRUE(second.WaitForCount(10, seconds(15))) << sidecar->Logs();
  EXPECT_EQ(handler_.Count(), 1u);
  EXPECT_EQ(RequestsFor(handler_, before), 1u);

  // The folder the first file lived in is gone: the watcher still sees the next swap.
  c.handler_url = "";
  SwapConfigMap(dir, "..2026_3", Yaml(c), "..2026_2");
  ASSERT_TRUE(Eventually([&] { return Reloads("applied") == 2; }, seconds(20))) << sidecar->Logs();
  std::vector<std::string> back;
  for (int i = 0; i < 10; ++i) back.push_back(Add({"n", std::to_string(i)}));
  ASSERT_TRUE(handler_.WaitForCount(11, seconds(15))) << sidecar->Logs();
  for (const auto& id : back) EXPECT_EQ(RequestsFor(second, id), 0u) << id;
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10)));
  EXPECT_EQ(Reloads("invalid"), 0);
}

// log.level is live: the debug lines start at once, and no subscription's loop is stopped and
// built again for it (a new loop would set its group up again and log "consumer group ready").
TEST_F(ReloadTest, ALogLevelChangeIsLiveAndRestartsNoLoop) {
  // Each entry's first attempt fails: its retry is logged at debug ("delivery failed; will retry").
  handler_.SetBehaviour([](const ReceivedRequest& request) {
    HandlerReply reply;
    if (request.Header("streamcar-attempts") == "1") reply.status = 500;
    return reply;
  });
  SidecarConfig c;
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  const std::string quiet = Add({"n", "at info"});
  ASSERT_TRUE(Eventually([&] { return RequestsFor(handler_, quiet) == 2 && PendingCount() == 0; },
                         seconds(10)))
      << sidecar->Logs();

  c.top_extra = "log:\n  level: debug\n";
  WriteAtomically(sidecar->config_path(), Yaml(c));
  ASSERT_EQ(::kill(sidecar->pid(), SIGHUP), 0);
  ASSERT_TRUE(Eventually([&] { return Reloads("applied") == 1; }, seconds(10))) << sidecar->Logs();
  auto reloaded = LinesStartingWith(sidecar->Logs(), "configuration reloaded");
  ASSERT_EQ(reloaded.size(), 1u) << sidecar->Logs();
  EXPECT_STREQ(reloaded[0]["keys"].GetString(), "log.level");

  const std::string loud = Add({"n", "at debug"});
  ASSERT_TRUE(Eventually(
      [&] { return !LinesStartingWith(sidecar->Logs(), "delivery failed; will retry").empty(); },
      seconds(10)))
      << sidecar->Logs();
  ASSERT_TRUE(Eventually([&] { return RequestsFor(handler_, loud) == 2 && PendingCount() == 0; },
                         seconds(10)))
      << sidecar->Logs();
  // Only the entry delivered after the reload has its retry logged: at info there was none.
  auto retries = LinesStartingWith(sidecar->Logs(), "delivery failed; will retry");
  ASSERT_EQ(retries.size(), 1u) << sidecar->Logs();
  EXPECT_EQ(std::string(retries[0]["id"].GetString()), loud);
  EXPECT_STREQ(retries[0]["level"].GetString(), "debug");
  EXPECT_EQ(LinesStartingWith(sidecar->Logs(), "consumer group ready").size(), 1u)
      << sidecar->Logs();
  EXPECT_TRUE(LinesStartingWith(sidecar->Logs(), "shutdown").empty()) << sidecar->Logs();
  EXPECT_EQ(Reloads("refused"), 0);
  EXPECT_EQ(Reloads("invalid"), 0);
  EXPECT_TRUE(sidecar->running());
}

TEST_F(ReloadTest, AFileThatDoesNotLoadChangesNothingAndIsLoggedAsCheckSaysIt) {
  SidecarConfig c;
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  TestHandler second;
  SidecarConfig bad = c;
  bad.handler_url = second.url("/");  // would move deliveries, were the file taken
  bad.subscription_extra = "    claims: { count: 5 }\n";
  WriteAtomically(sidecar->config_path(), Yaml(bad));
  ASSERT_EQ(::kill(sidecar->pid(), SIGHUP), 0);
  ASSERT_TRUE(Eventually([&] { return Reloads("invalid") == 1; }, seconds(10))) << sidecar->Logs();
  std::this_thread::sleep_for(milliseconds(600));  // the watcher's look at the same edit
  EXPECT_EQ(Reloads("invalid"), 1);
  EXPECT_EQ(Reloads("applied"), 0);

  const auto check = RunStreamcar({"check", "-c", sidecar->config_path()});
  EXPECT_EQ(check.exit_code, 2);
  ASSERT_TRUE(check.err.starts_with("streamcar: ")) << check.err;
  std::string message = check.err.substr(std::string("streamcar: ").size());
  while (!message.empty() && message.back() == '\n') message.pop_back();
  EXPECT_NE(message.find("claims"), std::string::npos) << message;
  EXPECT_EQ(LinesStartingWith(sidecar->Logs(), message).size(), 1u) << sidecar->Logs();
  for (const auto& line : LinesStartingWith(sidecar->Logs(), message)) {
    EXPECT_EQ(std::string(line["msg"].GetString()), message);
  }

  Add({"n", "1"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
  EXPECT_EQ(second.Count(), 0u);
  EXPECT_TRUE(sidecar->running());
}

TEST_F(ReloadTest, TheRedisUrlOrTheSetOfSubscriptionsIsRefusedInOneLine) {
  SidecarConfig c;
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  SidecarConfig changed = c;
  changed.redis_url = "redis://127.0.0.1:" + std::to_string(FreePort()) + "/0";
  changed.subscription_extra =
      "  - stream: invoices\n    group: billing\n    start: new\n"
      "    handler: { url: \"" +
      handler_.url("/") + "\" }\n";
  WriteAtomically(sidecar->config_path(), Yaml(changed));
  ASSERT_EQ(::kill(sidecar->pid(), SIGHUP), 0);
  ASSERT_TRUE(Eventually([&] { return Reloads("refused") == 1; }, seconds(10))) << sidecar->Logs();
  std::this_thread::sleep_for(milliseconds(600));
  EXPECT_EQ(Reloads("refused"), 1);
  EXPECT_EQ(Reloads("applied"), 0);
  auto lines = LinesStartingWith(sidecar->Logs(), "configuration reload refused");
  ASSERT_EQ(lines.size(), 1u) << sidecar->Logs();
  EXPECT_STREQ(lines[0]["keys"].GetString(), "redis.url, subscriptions");
  // The running configuration stays: the same Redis, the same handler.
  Add({"n", "1"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10)));
  EXPECT_TRUE(sidecar->running());
}

// The file changed while `run` waited for Redis, before it watched the file: the change is found
// once the subscriptions have started, without a signal.
TEST_F(ReloadTest, AChangeWhileWaitingForRedisIsAppliedOnceStarted) {
  TestHandler second;
  SidecarConfig c;
  redis_->Kill();
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(Eventually([&] { return sidecar->Logs().find("retry_in_ms") != std::string::npos; },
                         seconds(10)))
      << sidecar->Logs();
  c.handler_url = second.url("/");
  WriteAtomically(sidecar->config_path(), Yaml(c));
  redis_->Start();
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  ASSERT_TRUE(Eventually([&] { return Reloads("applied") == 1; }, seconds(10))) << sidecar->Logs();
  Add({"n", "1"});
  ASSERT_TRUE(second.WaitForCount(1, seconds(10))) << sidecar->Logs();
  EXPECT_EQ(handler_.Count(), 0u);
}

// A sharded subscription's loops run under its member (SPEC 9): its keys are refused, saying so.
TEST_F(ReloadTest, AShardedSubscriptionsHandlerUrlIsRefusedWithItsReason) {
  SidecarConfig c;
  c.handler_extra = "timeout: 1s";
  c.subscription_extra = "    sharding: { shards: 2, initial_delay: 100ms, drain_timeout: 5s }\n";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  TestHandler second;
  c.handler_url = second.url("/");
  WriteAtomically(sidecar->config_path(), Yaml(c));
  ASSERT_EQ(::kill(sidecar->pid(), SIGHUP), 0);
  ASSERT_TRUE(Eventually([&] { return Reloads("refused") == 1; }, seconds(10))) << sidecar->Logs();
  auto lines = LinesStartingWith(sidecar->Logs(), "configuration reload refused");
  ASSERT_EQ(lines.size(), 1u) << sidecar->Logs();
  EXPECT_STREQ(lines[0]["keys"].GetString(), "subscriptions[0].handler.url");
  EXPECT_NE(std::string(lines[0]["why"].GetString()).find("sharded"), std::string::npos);
  EXPECT_TRUE(sidecar->running());
}

TEST_F(ReloadTest, SighupWithAnUnchangedFileDoesNotEndTheProcess) {
  SidecarConfig c;
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  // One after the other: signals sent together may arrive as one.
  for (size_t i = 1; i <= 3; ++i) {
    ASSERT_EQ(::kill(sidecar->pid(), SIGHUP), 0);
    ASSERT_TRUE(Eventually(
        [&] {
          return LinesStartingWith(sidecar->Logs(), "configuration reload: the file is as it was")
                     .size() == i;
        },
        seconds(10)))
        << sidecar->Logs();
  }
  EXPECT_TRUE(sidecar->running());
  Add({"n", "1"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
  EXPECT_EQ(Reloads("applied"), 0);
  EXPECT_EQ(HttpGet(admin_port_, "/readyz").first, 200);
  // Teardown's SIGTERM still drains and exits 0 (checked by SidecarProcess).
}

}  // namespace
}  // namespace streamcar::testing
