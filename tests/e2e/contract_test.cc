// SPEC rules that need a whole run of the binary to check: no destructive command is ever sent,
// stderr is JSON lines with repeat counts, an unreachable Redis is logged once per backoff step,
// every non-zero exit says what and where in one line, `admin.listen: ""` turns the server off,
// custom reject statuses and dead-letter stream names, backpressure, and readiness during a drain.

#include <dirent.h>
#include <rapidjson/document.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/e2e/e2e_fixture.h"
#include "tests/support/redis_monitor.h"

namespace streamcar::testing {
namespace {

class ContractTest : public E2eTest {};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// SPEC 4.1.2: no command that destroys a group, a consumer or a stream is ever sent. MONITOR
// watches a whole scenario: deliveries, retries, dead letters, a peer's reclaim of a killed
// consumer's entries, a group that vanished and is re-created, retention, and a graceful stop.
TEST_F(ContractTest, NoDestructiveCommandIsEverSent) {
  RedisMonitor monitor(redis_->port());
  ASSERT_TRUE(monitor.ok());
  std::atomic<bool> hang{true};
  handler_.SetBehaviour([&](const ReceivedRequest& r) {
    if (r.body.find("\"fail\"") != std::string::npos) return HandlerReply{500};
    if (r.body.find("\"reject\"") != std::string::npos) return HandlerReply{422};
    HandlerReply reply;
    if (hang && r.Header("streamcar-attempts") == "1") reply.delay = milliseconds(6000);
    return reply;
  });
  SidecarConfig c;
  c.consumer = "doomed";
  c.handler_extra = "timeout: 30s";
  auto doomed = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << doomed->Logs();
  std::string held = Add({"n", "held"});
  ASSERT_TRUE(Eventually([&] { return RequestsFor(held).size() == 1; }, seconds(15)));
  doomed->Kill();
  hang = false;

  SidecarConfig peer;
  peer.consumer = "survivor";
  peer.min_idle = "500ms";
  peer.claim_interval = "300ms";
  peer.subscription_extra = "    retention: { max_len: 1000, interval: 200ms }\n";
  auto survivor = StartPeer(peer);
  ASSERT_TRUE(WaitReady(seconds(15), survivor->admin_port())) << survivor->Logs();
  std::string failing = Add({"n", "fail"});
  std::string rejected = Add({"n", "reject"});
  std::string fine = Add({"n", "ok"});
  ASSERT_TRUE(
      Eventually([&] { return Len("orders:dlq") == 2 && PendingCount() == 0; }, seconds(30)))
      << survivor->Logs();
  EXPECT_EQ(RequestsFor(held).size(), 2u);  // reclaimed from the killed consumer
  survivor->Terminate();
  ASSERT_EQ(survivor->Wait(seconds(30)), 0) << survivor->Logs();

  ASSERT_GT(monitor.Commands().size(), 20u);  // the watch really saw the scenario
  EXPECT_FALSE(monitor.Matching("XAUTOCLAIM").empty());
  for (const char* forbidden :
       {"DEL", "UNLINK", "XGROUP DESTROY", "XGROUP DELCONSUMER", "FLUSHALL", "FLUSHDB"}) {
    const auto seen = monitor.Matching(forbidden);
    EXPECT_TRUE(seen.empty()) << forbidden << " was sent: " << seen.front();
  }
  EXPECT_EQ(redis_->Run({"XINFO", "GROUPS", "orders"}).view().Size(), 1u);
}

// SPEC 6: one JSON object per line on stderr with ts, level and msg; a repeating error is written
// at most once per second, and the line after a quiet spell carries the count held back.
TEST_F(ContractTest, EveryStderrLineIsAJsonObjectAndRepeatsAreCounted) {
  handler_.Stop();  // every delivery is refused: the same warning, over and over
  auto sidecar = StartSidecar({});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  Add({"n", "1"});
  auto repeated_line = [&] {
    for (const auto& line : Lines(sidecar->Logs())) {
      if (line.find("\"repeated\":") != std::string::npos &&
          line.find("handler refused") != std::string::npos)
        return true;
    }
    return false;
  };
  ASSERT_TRUE(Eventually(repeated_line, seconds(30))) << sidecar->Logs();
  handler_.Restart();
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(15))) << sidecar->Logs();
  sidecar->Terminate();
  ASSERT_EQ(sidecar->Wait(seconds(30)), 0) << sidecar->Logs();

  const auto lines = Lines(sidecar->Logs());
  ASSERT_GE(lines.size(), 4u);
  std::map<std::string, int64_t> last_ms;  // msg -> ts of its previous line (warn and above)
  int counted = 0;
  for (const auto& line : lines) {
    rapidjson::Document d;
    d.Parse(line.c_str(), line.size());
    ASSERT_FALSE(d.HasParseError()) << "not JSON: " << line;
    ASSERT_TRUE(d.IsObject()) << line;
    ASSERT_TRUE(d.HasMember("ts") && d["ts"].IsString()) << line;
    ASSERT_TRUE(d.HasMember("level") && d["level"].IsString()) << line;
    ASSERT_TRUE(d.HasMember("msg") && d["msg"].IsString()) << line;
    const std::string ts = d["ts"].GetString();
    // RFC 3339 in UTC with milliseconds: 2026-11-30T05:00:00.123Z
    ASSERT_EQ(ts.size(), 24u) << line;
    EXPECT_EQ(ts[10], 'T') << line;
    EXPECT_EQ(ts.back(), 'Z') << line;
    const std::set<std::string> levels = {"debug", "info", "warn", "error"};
    EXPECT_TRUE(levels.count(d["level"].GetString())) << line;
    if (d.HasMember("repeated")) {
      ASSERT_TRUE(d["repeated"].IsInt64()) << line;
      EXPECT_GT(d["repeated"].GetInt64(), 0) << line;
      ++counted;
    }
    if (std::string(d["msg"].GetString()).starts_with("handler refused")) {
      // At most once per second: the refusals come every 100 ms to 2 s.
      const int64_t ms = (std::stoll(ts.substr(11, 2)) * 3600 + std::stoll(ts.substr(14, 2)) * 60 +
                          std::stoll(ts.substr(17, 2))) *
                             1000 +
                         std::stoll(ts.substr(20, 3));
      if (last_ms.count("refused")) {
        EXPECT_GE(ms - last_ms["refused"], 999) << line;
      }
      last_ms["refused"] = ms;
    }
  }
  EXPECT_GE(counted, 1);
}

// SPEC 4.1.1: an unreachable Redis is retried with capped exponential backoff and logged at most
// once per backoff step, per connection. (The settler waits its own backoff rather than the
// retry_in_ms its line announces, so the check is on the growing spacing of the lines.)
TEST_F(ContractTest, UnreachableRedisIsLoggedOncePerBackoffStep) {
  SidecarConfig c;
  c.redis_url = "redis://127.0.0.1:" + std::to_string(FreePort()) + "/0";
  auto sidecar = StartSidecar(c);
  auto unreachable = [&] {
    std::vector<rapidjson::Document> out;
    for (const auto& line : Lines(sidecar->Logs())) {
      if (line.find("redis unreachable") == std::string::npos) continue;
      out.emplace_back();
      out.back().Parse(line.c_str(), line.size());
    }
    return out;
  };
  // Backoff from 100 ms doubling: five steps take a few seconds.
  ASSERT_TRUE(Eventually([&] { return unreachable().size() >= 5; }, seconds(30)))
      << sidecar->Logs();
  std::map<std::string, std::vector<std::pair<std::string, int64_t>>> by_role;  // ts, retry_in
  for (const auto& d : unreachable()) {
    ASSERT_TRUE(d.IsObject());
    ASSERT_TRUE(d.HasMember("retry_in_ms") && d["retry_in_ms"].IsInt64());
    const std::string role = d.HasMember("role") ? d["role"].GetString() : "";
    by_role[role].emplace_back(d["ts"].GetString(), d["retry_in_ms"].GetInt64());
  }
  auto ms_of = [](const std::string& ts) {
    return (std::stoll(ts.substr(11, 2)) * 3600 + std::stoll(ts.substr(14, 2)) * 60 +
            std::stoll(ts.substr(17, 2))) *
               1000 +
           std::stoll(ts.substr(20, 3));
  };
  for (const auto& [role, lines] : by_role) {
    for (size_t i = 1; i < lines.size(); ++i) {
      // One line per step, and the steps grow: 100 ms doubling up to 5 s, with jitter (+/- 20%
      // here, 60% of slack below). A line per connection attempt without backoff fails this.
      const int64_t step = std::min<int64_t>(int64_t{100} << std::min<size_t>(i - 1, 10), 5000);
      EXPECT_GE(ms_of(lines[i].first) - ms_of(lines[i - 1].first), step * 4 / 10)
          << role << " line " << i;
    }
  }
  EXPECT_TRUE(sidecar->running());
}

// SPEC 1: every non-zero exit prints one clear line saying what and where: a configuration error
// (exit 2) and a runtime failure (exit 1, WRONGTYPE on the stream key).
TEST_F(ContractTest, NonZeroExitsSayWhatAndWhereInOneLine) {
  SidecarConfig bad;
  bad.start = "sometime";
  const std::string path = WriteConfig(bad);
  auto config_error = RunStreamcar({"run", "-c", path});
  EXPECT_EQ(config_error.exit_code, 2);
  auto lines = Lines(config_error.err);
  ASSERT_EQ(lines.size(), 1u) << config_error.err;
  EXPECT_NE(lines[0].find(path), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("subscriptions[0].start"), std::string::npos) << lines[0];

  redis_->Run({"SET", "orders", "not a stream"});
  auto sidecar = StartSidecar({});
  sidecar->ExpectExit(1);
  ASSERT_EQ(sidecar->Wait(seconds(15)), 1) << sidecar->Logs();
  // Informational lines may come first; the failure itself is exactly one error line naming the
  // key and the server.
  std::vector<std::string> errors;
  for (const auto& line : Lines(sidecar->Logs())) {
    if (line.find("\"level\":\"error\"") != std::string::npos) errors.push_back(line);
  }
  ASSERT_EQ(errors.size(), 1u) << sidecar->Logs();
  EXPECT_NE(errors[0].find("WRONGTYPE"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("orders"), std::string::npos) << errors[0];
}

// The lingers' environment overrides (runtime/tuning.h) are checked like the configuration: a
// malformed one is exit 2 with one line naming the variable, before anything connects.
TEST_F(ContractTest, AMalformedLingerOverrideExitsTwoNamingTheVariable) {
  const std::string path = WriteConfig(SidecarConfig{});
  auto bare = RunStreamcar({"run", "-c", path}, {"STREAMCAR_ACK_LINGER=5"});
  EXPECT_EQ(bare.exit_code, 2);
  auto lines = Lines(bare.err);
  ASSERT_EQ(lines.size(), 1u) << bare.err;
  EXPECT_NE(lines[0].find("STREAMCAR_ACK_LINGER=\"5\""), std::string::npos) << lines[0];

  auto too_long = RunStreamcar({"run", "-c", path}, {"STREAMCAR_READ_LINGER=2s"});
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_EQ(too_long.err, "streamcar: STREAMCAR_READ_LINGER=\"2s\": at most 100ms\n");
}

// The listening TCP sockets of process `pid` (inodes from /proc/<pid>/fd matched against
// /proc/net/tcp entries in state LISTEN).
std::vector<std::string> ListeningPorts(pid_t pid) {
  std::set<std::string> inodes;
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* dir = ::opendir(fd_dir.c_str())) {
    while (dirent* e = ::readdir(dir)) {
      char target[256];
      const std::string link = fd_dir + "/" + e->d_name;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      const std::string t(target, static_cast<size_t>(n));
      if (t.starts_with("socket:[")) inodes.insert(t.substr(8, t.size() - 9));
    }
    ::closedir(dir);
  }
  std::vector<std::string> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      fields >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >>
          inode;
      if (state == "0A" && inodes.count(inode)) ports.push_back(local);
    }
  }
  return ports;
}

// SPEC 2: admin.listen "" turns the admin server off; the sidecar still consumes.
TEST_F(ContractTest, EmptyAdminListenTurnsTheServerOff) {
  SidecarConfig c;
  c.admin_listen = "";
  auto sidecar = StartSidecar(c);
  std::string id = Add({"n", "1"});
  ASSERT_TRUE(
      Eventually([&] { return RequestsFor(id).size() == 1 && PendingCount() == 0; }, seconds(15)))
      << sidecar->Logs();
  EXPECT_TRUE(ListeningPorts(sidecar->pid()).empty());
  EXPECT_EQ(HttpGet(admin_port_, "/healthz").first, 0);
  // The same config with an address does listen: the check above can see a listener. (Under
  // another consumer name: a second live process with the first's would exit 1, SPEC 4.7.)
  SidecarConfig peer;
  peer.consumer = "c2";
  auto listening = StartPeer(peer);
  ASSERT_TRUE(WaitReady(seconds(15), listening->admin_port())) << listening->Logs();
  EXPECT_EQ(ListeningPorts(listening->pid()).size(), 1u);
}

// SPEC 2/3.2/3.3: a custom reject_statuses list replaces the default, and a custom
// dead_letter.stream receives the dead letters (the default one stays untouched).
TEST_F(ContractTest, CustomRejectStatusesAndDeadLetterStream) {
  handler_.SetBehaviour([](const ReceivedRequest& r) {
    if (r.body.find("\"conflict\"") != std::string::npos) return HandlerReply{409, "taken"};
    return HandlerReply{422, "not in the list any more"};
  });
  SidecarConfig c;
  c.handler_extra = "reject_statuses: [409]";
  c.max_attempts = 2;
  c.subscription_extra = "    dead_letter: { stream: \"audit:failed\" }\n";
  auto sidecar = StartSidecar(c);
  std::string conflict = Add({"kind", "conflict"});
  std::string unprocessable = Add({"kind", "other"});
  ASSERT_TRUE(
      Eventually([&] { return Len("audit:failed") == 2 && PendingCount() == 0; }, seconds(15)))
      << sidecar->Logs();
  EXPECT_EQ(redis_->Run({"EXISTS", "orders:dlq"}).view().Integer(), 0);
  std::map<std::string, DeadLetter> by_id;
  for (auto& letter : DeadLetters("audit:failed")) by_id[letter.Get("streamcar.id")] = letter;
  ASSERT_EQ(by_id.size(), 2u);
  EXPECT_EQ(by_id[conflict].Get("streamcar.reason"), "rejected");
  EXPECT_EQ(by_id[conflict].Get("streamcar.status"), "409");
  EXPECT_EQ(by_id[conflict].Get("streamcar.attempts"), "1");
  EXPECT_EQ(RequestsFor(conflict).size(), 1u);
  // 422 is not in the custom list: retried until max_attempts.
  EXPECT_EQ(by_id[unprocessable].Get("streamcar.reason"), "max_attempts");
  EXPECT_EQ(by_id[unprocessable].Get("streamcar.status"), "422");
  EXPECT_EQ(RequestsFor(unprocessable).size(), 2u);
}

// SPEC 4.2: the reader never reads more than there is room for (concurrency x 4 entries here),
// however long the backlog: the group's pending list stays bounded while the handler is slow.
TEST_F(ContractTest, ABacklogIsReadOnlyAsFarAsThereIsRoom) {
  std::atomic<bool> slow{true};
  handler_.SetBehaviour([&](const ReceivedRequest&) {
    HandlerReply reply;
    if (slow) reply.delay = milliseconds(500);
    return reply;
  });
  for (int i = 0; i < 200; ++i) Add({"n", std::to_string(i)});
  SidecarConfig c;
  c.handler_extra = "concurrency: 2, timeout: 10s";
  auto sidecar = StartSidecar(c);
  int64_t most = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        most = std::max(most, PendingCount());
        return handler_.Count() >= 6;
      },
      seconds(30)))
      << sidecar->Logs();
  EXPECT_LE(most, 8);  // 2 x 4
  EXPECT_LE(PendingCount(), 8);
  EXPECT_GT(PendingCount(), 0);
  slow = false;
  ASSERT_TRUE(
      Eventually([&] { return PendingCount() == 0 && handler_.Count() >= 200; }, seconds(60)))
      << sidecar->Logs();
}

// SPEC 4.5/5: /readyz answers 503 during the drain, while the process still runs.
TEST_F(ContractTest, ReadyzIs503WhileDraining) {
  handler_.SetBehaviour([](const ReceivedRequest&) {
    HandlerReply reply;
    reply.delay = milliseconds(4000);
    return reply;
  });
  SidecarConfig c;
  c.handler_extra = "timeout: 20s";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  Add({"n", "1"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(15)));
  sidecar->Terminate();
  bool seen_503_while_running = false;
  ASSERT_TRUE(Eventually(
      [&] {
        const int status = HttpGet(admin_port_, "/readyz").first;
        if (status == 503 && sidecar->running()) seen_503_while_running = true;
        return seen_503_while_running || !sidecar->running();
      },
      seconds(15)));
  EXPECT_TRUE(seen_503_while_running);
  EXPECT_EQ(HttpGet(admin_port_, "/healthz").first == 200, sidecar->running());
  ASSERT_EQ(sidecar->Wait(seconds(30)), 0) << sidecar->Logs();
  EXPECT_EQ(PendingCount(), 0);  // the request in flight finished and was acknowledged
}

}  // namespace
}  // namespace streamcar::testing
