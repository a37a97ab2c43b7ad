// The series dashboards rely on (SPEC 5), against the real binary: streamcar_build_info with the
// revision this build stamped, the standard process series read from the running process,
// streamcar_oldest_pending_seconds while a handler holds an entry, and the whole /metrics output
// through `promtool check metrics` (the Prometheus project's own linter).

#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sidecar/common/version.h"
#include "sidecar/keys/sharding_keys.h"
#include "tests/e2e/sharded_fixture.h"
#include "tests/support/request_gate.h"

namespace streamcar::testing {
namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// `promtool check metrics` on `text`: its exit code and everything it printed.
std::pair<int, std::string> Promtool(const std::string& text) {
  const std::string dir = MakeTempDir("streamcar-promtool-");
  std::ofstream(dir + "/metrics.txt") << text;
  const std::string command =
      "promtool check metrics < " + dir + "/metrics.txt > " + dir + "/out.txt 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream out(dir + "/out.txt");
  std::stringstream printed;
  printed << out.rdbuf();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, printed.str()};
}

class MetricsTest : public E2eTest {};

TEST_F(MetricsTest, BuildInfoCarriesTheStampedRevisionAndVersionPrintsIt) {
  // The header this build stamped (sidecar/common/version_stamp.cmake) is what the binary says.
  const std::string revision = kRevision;
  ASSERT_FALSE(revision.empty());
  const std::string line = "streamcar " + std::string(kVersion) + " (revision " + revision +
                           ", built " + kBuildDate + ")\n";
  for (const std::string flag : {"version", "--version"}) {
    auto version = RunStreamcar({flag});
    EXPECT_EQ(version.exit_code, 0) << flag << ": " << version.err;
    EXPECT_EQ(version.out, line) << flag;
  }
  // An ISO 8601 UTC instant.
  EXPECT_EQ(std::string(kBuildDate).size(), 20u) << kBuildDate;
  EXPECT_EQ(std::string(kBuildDate).back(), 'Z') << kBuildDate;

  auto sidecar = StartSidecar({});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  const std::string text = Metrics();
  EXPECT_NE(text.find("# TYPE streamcar_build_info gauge\n"), std::string::npos) << text;
  EXPECT_EQ(
      MetricValue(text, "streamcar_build_info",
                  {"revision=\"" + revision + "\"", "version=\"" + std::string(kVersion) + "\""}),
      1)
      << text;
}

TEST_F(MetricsTest, ProcessSeriesDescribeTheRunningProcess) {
  const double started = NowSeconds();
  auto sidecar = StartSidecar({});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  std::string text = Metrics();
  for (const std::string type :
       {"process_cpu_seconds_total counter", "process_resident_memory_bytes gauge",
        "process_virtual_memory_bytes gauge", "process_open_fds gauge", "process_max_fds gauge",
        "process_start_time_seconds gauge"}) {
    EXPECT_NE(text.find("# TYPE " + type + "\n"), std::string::npos) << type << "\n" << text;
  }
  const double start_time = MetricValue(text, "process_start_time_seconds");
  EXPECT_NEAR(start_time, started, 60) << text;
  EXPECT_GT(MetricValue(text, "process_resident_memory_bytes"), 0);
  EXPECT_GE(MetricValue(text, "process_virtual_memory_bytes"),
            MetricValue(text, "process_resident_memory_bytes"));
  EXPECT_GT(MetricValue(text, "process_open_fds"), 0);
  EXPECT_GE(MetricValue(text, "process_cpu_seconds_total"), 0);

  // process_max_fds is the process's RLIMIT_NOFILE now: lowered from outside, the next scrape
  // says so.
  rlimit limit{};
  ASSERT_EQ(::prlimit(sidecar->pid(), RLIMIT_NOFILE, nullptr, &limit), 0);
  EXPECT_EQ(MetricValue(text, "process_max_fds"), static_cast<double>(limit.rlim_cur));
  rlimit lowered = limit;
  lowered.rlim_cur = 777;
  ASSERT_EQ(::prlimit(sidecar->pid(), RLIMIT_NOFILE, &lowered, nullptr), 0);
  text = Metrics();
  EXPECT_EQ(MetricValue(text, "process_max_fds"), 777) << text;
  EXPECT_LT(MetricValue(text, "process_open_fds"), 777);
}

// SPEC 5: the age of the group's oldest pending entry (all consumers), 0 with nothing pending,
// from the beat that refreshes streamcar_pending (every 5 s).
TEST_F(MetricsTest, OldestPendingSecondsGrowsWhileAHandlerHoldsAnEntry) {
  auto gate = std::make_shared<RequestGate>();
  handler_.SetBehaviour([gate](const ReceivedRequest&) {
    gate->Hold(seconds(60));
    return HandlerReply{200, ""};
  });
  SidecarConfig c;
  c.handler_extra = "concurrency: 1, timeout: 60s";
  auto sidecar = StartSidecar(c);
  const OpenAtExit open_at_exit{gate};
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  const std::string sub = "subscription=\"orders/billing\"";
  // The series is there at once, at 0, and stays 0 after a beat with nothing pending.
  EXPECT_EQ(Metric("streamcar_oldest_pending_seconds", {sub}), 0) << Metrics();
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10)));

  // An entry written 30 s ago (its id's time) is read and held by the handler.
  const int64_t written_ms = static_cast<int64_t>(NowSeconds() * 1000) - 30'000;
  redis_->Run({"XADD", "orders", std::to_string(written_ms) + "-0", "n", "1"});
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 1; }, seconds(10)));
  double first = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        first = Metric("streamcar_oldest_pending_seconds", {sub});
        return first > 0;
      },
      seconds(15)))
      << Metrics() << sidecar->Logs();
  // Its age since written, as the beat saw it (within its 5 s interval and the test's own time).
  const double age_now = NowSeconds() - static_cast<double>(written_ms) / 1000;
  EXPECT_GE(first, 30) << first;
  EXPECT_LE(first, age_now + 1) << first;
  EXPECT_GE(first, age_now - 7) << first;
  // The next beats see it older.
  EXPECT_TRUE(Eventually([&] { return Metric("streamcar_oldest_pending_seconds", {sub}) > first; },
                         seconds(15)))
      << Metrics();

  // Released and acknowledged: back to 0.
  gate->Open();
  EXPECT_TRUE(Eventually(
      [&] { return PendingCount() == 0 && Metric("streamcar_oldest_pending_seconds", {sub}) == 0; },
      seconds(20)))
      << Metrics() << sidecar->Logs();
}

// Everything /metrics serves passes the Prometheus linter without a finding: names, types, units,
// counters' _total, HELP on every family. After traffic, so histograms and every label set are in.
TEST_F(MetricsTest, PromtoolAcceptsTheWholeOutputWithoutALintFinding) {
  handler_.SetBehaviour([](const ReceivedRequest& request) {
    return HandlerReply{request.body.find("fail") != std::string::npos ? 500 : 200, ""};
  });
  SidecarConfig c;
  c.max_attempts = 1;
  c.subscription_extra = "    retention: { max_len: 1000, interval: 1s }\n";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  Add({"n", "ok"});
  Add({"n", "fail"});
  ASSERT_TRUE(WaitMetric("streamcar_acked_total", {}, 2)) << Metrics() << sidecar->Logs();
  const std::string text = Metrics();
  auto [code, printed] = Promtool(text);
  EXPECT_EQ(code, 0) << printed;
  EXPECT_EQ(printed, "") << text;
  // The linter did see the families this issue adds.
  for (const std::string name :
       {"streamcar_build_info", "streamcar_oldest_pending_seconds", "process_cpu_seconds_total",
        "process_start_time_seconds", "process_max_fds"}) {
    EXPECT_NE(text.find("# TYPE " + name + " "), std::string::npos) << name;
  }
  // And it does find what it should: a counter without _total is a finding.
  auto [bad_code, bad] = Promtool("# HELP x_count A count.\n# TYPE x_count counter\nx_count 1\n");
  EXPECT_NE(bad_code, 0);
  EXPECT_NE(bad.find("should have \"_total\" suffix"), std::string::npos) << bad;
}

// A sharded subscription: each shard's loop measures its own shard, and the member publishes the
// subscription's series as the oldest over the shards it owns; the output still lints clean.
class ShardedMetricsTest : public ShardedE2eTest {
 protected:
  ShardedMetricsTest() { shards_ = 2; }
};

TEST_F(ShardedMetricsTest, TheOldestPendingAgeIsTheOldestOverTheMembersShards) {
  auto gate = std::make_shared<RequestGate>();
  handler_.SetBehaviour([gate](const ReceivedRequest&) {
    gate->Hold(seconds(60));
    return HandlerReply{200, ""};
  });
  ShardingTiming timing;  // a revoked shard's drain must outlast the held request
  timing.drain_timeout = "25s";
  timing.rebalance_timeout = "30s";
  SidecarConfig c = Sharded("c1", timing);
  c.handler_extra = "timeout: 20s";
  c.drain_timeout = "25s";
  auto sidecar = StartSidecar(c);
  const OpenAtExit open_at_exit{gate};
  const std::string sub = "subscription=\"orders/billing\"";
  ASSERT_TRUE(Eventually([&] { return Metric("streamcar_shards_owned", {sub}) == 2; }, seconds(20)))
      << sidecar->Logs();
  EXPECT_EQ(Metric("streamcar_oldest_pending_seconds", {sub}), 0);

  // One entry 40 s old on one shard, a fresh one on the other: the oldest is the first.
  const int64_t now_ms = static_cast<int64_t>(NowSeconds() * 1000);
  redis_->Run({"XADD", ShardKeyOf(0), std::to_string(now_ms - 40'000) + "-0", "key", "a"});
  redis_->Run({"XADD", ShardKeyOf(1), "*", "key", "b"});
  double oldest = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        oldest = Metric("streamcar_oldest_pending_seconds", {sub});
        return oldest >= 40;
      },
      seconds(20)))
      << Metrics() << sidecar->Logs();
  EXPECT_LE(oldest, NowSeconds() - static_cast<double>(now_ms - 40'000) / 1000 + 1);
  const std::string text = Metrics();
  EXPECT_EQ(text.find("streamcar_oldest_pending_seconds{shard="), std::string::npos);
  auto [code, printed] = Promtool(text);
  EXPECT_EQ(code, 0) << printed;
  EXPECT_EQ(printed, "") << text;

  gate->Open();
  EXPECT_TRUE(Eventually([&] { return Metric("streamcar_oldest_pending_seconds", {sub}) == 0; },
                         seconds(20)))
      << Metrics() << sidecar->Logs();
}

}  // namespace
}  // namespace streamcar::testing
