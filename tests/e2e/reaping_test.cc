// Consumer reaping (SPEC 4.6) with the real binary: a rollout with reaping on leaves no consumer
// behind (also one that died holding an entry, once a live pod reclaimed it), and with it off
// nothing is ever removed; the first pass waits for its offset; an ACL that refuses reaping
// turns it off and delivery goes on. The consumers are made old for real
// (tests/support/consumer_aging.h): Redis measures idle time itself. The sidecars run with
// STREAMCAR_TEST_REAP_OFFSET (the first pass's random offset, up to a minute, fixed).

#include <rapidjson/document.h>

#include <chrono>
#include <optional>
#include <sstream>
#include <thread>

#include "sidecar/redis/consumer_reaping.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/support/consumer_aging.h"
#include "tests/support/heavy.h"
#include "tests/support/redis_monitor.h"

namespace streamcar::testing {
namespace {

// The first pass on the first claim beat (ConsumerReaper::FirstPassOffsetForProcess).
const std::vector<std::string> kFirstPassAtOnce = {"STREAMCAR_TEST_REAP_OFFSET=0s"};

class ReapingTest : public E2eTest {
 protected:
  // The group's consumers: name -> pending.
  std::map<std::string, int64_t> Consumers() {
    std::map<std::string, int64_t> out;
    const auto reply = redis_->Run({"XINFO", "CONSUMERS", "orders", "billing"});
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      const auto row = reply.view()[i];
      std::string name;
      int64_t pending = -1;
      for (size_t k = 0; k + 1 < row.Size(); k += 2) {
        if (row[k].Str() == "name") name = std::string(row[k + 1].Str());
        if (row[k].Str() == "pending") pending = row[k + 1].Integer();
      }
      out[name] = pending;
    }
    return out;
  }

  // The rollout's first half: sidecar A (consumer a) delivers three entries and exits on SIGTERM;
  // consumer c takes an entry and keeps it pending (a pod that died holding work); then both are
  // made two hours old.
  void OldPodsLeftBehind() {
    SidecarConfig a;
    a.consumer = "a";
    auto sidecar = StartSidecar(a);
    ASSERT_TRUE(WaitReady()) << sidecar->Logs();
    for (int i = 0; i < 3; ++i) Add({"n", std::to_string(i)});
    ASSERT_TRUE(handler_.WaitForCount(3, seconds(10))) << sidecar->Logs();
    ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10)));
    sidecar->Terminate();
    ASSERT_EQ(sidecar->Wait(seconds(20)), 0) << sidecar->Logs();
    held_id_ = Add({"n", "held"});
    redis_->Run({"XREADGROUP", "GROUP", "billing", "c", "COUNT", "1", "STREAMS", "orders", ">"});
    ASSERT_EQ(Consumers(), (std::map<std::string, int64_t>{{"a", 0}, {"c", 1}}));
    AgeConsumers(*redis_, "orders", {"a", "c"}, std::chrono::hours(2));
  }

  // Sidecar B: consumer b, a claim beat every 300 ms, and c's entry too young to be reclaimed
  // (claim.min_idle 10m): c keeps it pending.
  SidecarConfig PodB(const std::string& reap_idle) {
    SidecarConfig b;
    b.consumer = "b";
    b.consumer_extra = reap_idle.empty() ? "" : "  reap_idle: " + reap_idle + "\n";
    b.claim_interval = "300ms";
    b.min_idle = "10m";
    return b;
  }

  // The log lines (SPEC 6 JSON) whose msg starts with `prefix`.
  static std::vector<std::string> LogLines(const std::string& logs, const std::string& prefix) {
    std::vector<std::string> out;
    std::istringstream in(logs);
    for (std::string line; std::getline(in, line);) {
      rapidjson::Document d;
      if (d.Parse(line.c_str()).HasParseError() || !d.IsObject() || !d.HasMember("msg")) continue;
      if (std::string(d["msg"].GetString()).rfind(prefix, 0) == 0) out.push_back(line);
    }
    return out;
  }

  double Reaped() {
    return Metric("streamcar_consumers_reaped_total", {"subscription=\"orders/billing\""});
  }

  std::string held_id_;
};

TEST_F(ReapingTest, ARolloutWithReapingOnLeavesNoConsumerBehind) {
  OldPodsLeftBehind();
  RedisMonitor monitor(redis_->port());
  ASSERT_TRUE(monitor.ok());
  auto b = StartSidecar(PodB("1h"), kFirstPassAtOnce);
  ASSERT_TRUE(WaitReady()) << b->Logs();
  ASSERT_TRUE(WaitMetric("streamcar_consumers_reaped_total", {"subscription=\"orders/billing\""}, 1,
                         seconds(10)))
      << b->Logs();
  // More beats come, but a pass at most once a minute: no listing after the first pass.
  // The pass's own listing and the script's (MONITOR shows a script's commands too).
  EXPECT_TRUE(
      Eventually([&] { return monitor.Matching("XGROUP DELCONSUMER").size() == 1; }, seconds(5)));
  const size_t listings = monitor.Matching("XINFO CONSUMERS").size();
  EXPECT_EQ(listings, 2u);
  std::this_thread::sleep_for(seconds(2));
  EXPECT_EQ(monitor.Matching("XINFO CONSUMERS").size(), listings);
  EXPECT_EQ(Reaped(), 1);
  EXPECT_EQ(monitor.Matching("XGROUP DELCONSUMER").size(), 1u);  // inside the script, for a only
  // The read connection loaded the reap script when it connected, before the pass listed
  // anything, so the pass's one EVALSHA found it (no NOSCRIPT, no load in the middle of it).
  const auto commands = monitor.Commands();
  std::optional<size_t> loaded;
  std::optional<size_t> listed;
  size_t calls = 0;
  for (size_t i = 0; i < commands.size(); ++i) {
    const auto& words = commands[i];
    if (words.size() > 2 && words[0] == "SCRIPT" &&
        words[2].find("DELCONSUMER") != std::string::npos && !loaded) {
      loaded = i;
    }
    if (words.size() > 1 && words[0] == "XINFO" && !listed) listed = i;
    if (words.size() > 1 && words[0] == "EVALSHA" && words[1] == redis::ReapScript().sha()) ++calls;
  }
  ASSERT_TRUE(loaded.has_value());
  ASSERT_TRUE(listed.has_value());
  EXPECT_LT(*loaded, *listed);
  EXPECT_EQ(calls, 1u);
  // a is gone; c (holding an entry) and B's own consumer stay, c with its entry.
  EXPECT_EQ(Consumers(), (std::map<std::string, int64_t>{{"b", 0}, {"c", 1}}));
  const auto pending = redis_->Run({"XPENDING", "orders", "billing", "-", "+", "10"});
  ASSERT_EQ(pending.view().Size(), 1u);
  EXPECT_EQ(pending.view()[0][0].Str(), held_id_);
  EXPECT_EQ(pending.view()[0][1].Str(), "c");
  // The log names a and its idle time.
  int lines = 0;
  std::istringstream logs(b->Logs());
  for (std::string line; std::getline(logs, line);) {
    rapidjson::Document d;
    if (d.Parse(line.c_str()).HasParseError() || !d.IsObject() || !d.HasMember("msg")) continue;
    if (std::string(d["msg"].GetString()) != "consumer reaped") continue;
    ++lines;
    EXPECT_EQ(std::string(d["subscription"].GetString()), "orders/billing") << line;
    EXPECT_EQ(std::string(d["consumer"].GetString()), "a") << line;
    EXPECT_GE(d["idle_ms"].GetInt64(), 7'200'000) << line;
    EXPECT_LT(d["idle_ms"].GetInt64(), 7'260'000) << line;
    EXPECT_EQ(std::string(d["idle"].GetString()).substr(0, 2), "2h") << line;
  }
  EXPECT_EQ(lines, 1) << b->Logs();
  // B still delivers (reaping is a step of the read connection, not in its way).
  Add({"n", "after"});
  ASSERT_TRUE(handler_.WaitForCount(4, seconds(10))) << b->Logs();
}

// The other half of "no consumer left behind" (docs/reaping.md): c died holding an entry. The
// surviving pod's beat reclaims it once it is older than claim.min_idle (here 8 s, so the first
// pass still sees c holding it), delivers and acknowledges it, and the next pass, at most a
// minute after the first (runtime/cadences.h), removes c. About 70 s.
TEST_F(ReapingTest, ADeadPodsEntryIsReclaimedAndALaterPassRemovesItsConsumer) {
  // About a minute of waiting on the reaper's real cadence: CI's heavy variants run it (HEAVY=1
  // sets STREAMCAR_HEAVY, plain build); the default run proves the first pass end to end (the
  // tests around this one) and the reaper's rules with a driven clock (ConsumerReaper unit tests).
  if (!HeavyRun() || UnderSanitizer()) {
    GTEST_SKIP() << "a minute of real reaping cadence: runs with STREAMCAR_HEAVY=1, plain build";
  }
  OldPodsLeftBehind();
  SidecarConfig pod = PodB("1h");
  pod.min_idle = "8s";
  auto b = StartSidecar(pod, kFirstPassAtOnce);
  ASSERT_TRUE(WaitReady()) << b->Logs();
  // The first pass: a goes, c stays because it holds the entry.
  ASSERT_TRUE(WaitMetric("streamcar_consumers_reaped_total", {"subscription=\"orders/billing\""}, 1,
                         seconds(10)))
      << b->Logs();
  EXPECT_EQ(Consumers(), (std::map<std::string, int64_t>{{"b", 0}, {"c", 1}}));
  const auto first_pass = std::chrono::steady_clock::now();
  // B's beat reclaims c's entry, delivers it (its second delivery) and acknowledges it.
  ASSERT_TRUE(handler_.WaitFor(
      [&](const std::vector<ReceivedRequest>& requests) {
        for (const auto& r : requests) {
          if (r.Header("streamcar-id") == held_id_) return true;
        }
        return false;
      },
      seconds(20)))
      << b->Logs();
  for (const auto& r : handler_.Requests()) {
    if (r.Header("streamcar-id") == held_id_) {
      EXPECT_EQ(r.Header("streamcar-attempts"), "2");  // c's delivery, then B's reclaim
    }
  }
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10))) << b->Logs();
  EXPECT_EQ(Consumers(), (std::map<std::string, int64_t>{{"b", 0}, {"c", 0}}));
  // The next pass removes c, now without pending entries, and only c.
  ASSERT_TRUE(WaitMetric("streamcar_consumers_reaped_total", {"subscription=\"orders/billing\""}, 2,
                         seconds(75)))
      << b->Logs();
  EXPECT_GE(std::chrono::steady_clock::now() - first_pass, seconds(50));  // not before its minute
  EXPECT_EQ(Consumers(), (std::map<std::string, int64_t>{{"b", 0}}));
  std::vector<std::string> reaped;
  for (const auto& line : LogLines(b->Logs(), "consumer reaped")) {
    rapidjson::Document d;
    d.Parse(line.c_str());
    reaped.emplace_back(d["consumer"].GetString());
    EXPECT_GE(d["idle_ms"].GetInt64(), 7'200'000) << line;
  }
  EXPECT_EQ(reaped, (std::vector<std::string>{"a", "c"})) << b->Logs();
  // Nothing lost, nothing twice: a's three entries and the held one, each answered once.
  EXPECT_EQ(handler_.Count(), 4u);
  EXPECT_EQ(Reaped(), 2);
}

TEST_F(ReapingTest, WithReapingOffNothingIsEverRemoved) {
  OldPodsLeftBehind();
  RedisMonitor monitor(redis_->port());
  ASSERT_TRUE(monitor.ok());
  auto b = StartSidecar(PodB(""));  // the default: consumer.reap_idle 0s
  ASSERT_TRUE(WaitReady()) << b->Logs();
  EXPECT_EQ(Reaped(), 0);  // the series exists from the start
  // Ten claim beats and more.
  std::this_thread::sleep_for(seconds(4));
  EXPECT_FALSE(monitor.Matching("XAUTOCLAIM").empty());  // the beat did run
  EXPECT_TRUE(monitor.Matching("XINFO CONSUMERS").empty());
  EXPECT_TRUE(monitor.Matching("XGROUP DELCONSUMER").empty());
  EXPECT_EQ(Consumers(), (std::map<std::string, int64_t>{{"a", 0}, {"b", 0}, {"c", 1}}));
  EXPECT_EQ(Reaped(), 0);
}

// The first pass comes at its offset from the start, not on the first claim beat: the replicas
// of a rollout do not all list and reap in the same moment.
TEST_F(ReapingTest, TheFirstPassWaitsForItsOffset) {
  OldPodsLeftBehind();
  RedisMonitor monitor(redis_->port());
  ASSERT_TRUE(monitor.ok());
  auto b = StartSidecar(PodB("1h"), {"STREAMCAR_TEST_REAP_OFFSET=4s"});
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitReady()) << b->Logs();
  // Several claim beats (every 300 ms) and no pass yet.
  std::this_thread::sleep_for(seconds(2) - (std::chrono::steady_clock::now() - started));
  EXPECT_FALSE(monitor.Matching("XAUTOCLAIM").empty());
  EXPECT_TRUE(monitor.Matching("XINFO CONSUMERS").empty());
  EXPECT_EQ(Reaped(), 0);
  ASSERT_TRUE(WaitMetric("streamcar_consumers_reaped_total", {"subscription=\"orders/billing\""}, 1,
                         seconds(10)))
      << b->Logs();
  EXPECT_GE(std::chrono::steady_clock::now() - started, seconds(4));
  EXPECT_EQ(Consumers(), (std::map<std::string, int64_t>{{"b", 0}, {"c", 1}}));
}

// An ACL user without what reaping needs: no retry fixes it, and reaping is an opt-in cleanup,
// so the sidecar logs one error naming reaping, the refused command and the missing rule, turns
// reaping off, removes nothing, and goes on delivering.
TEST_F(ReapingTest, AnAclThatRefusesReapingTurnsItOffAndDeliveryGoesOn) {
  OldPodsLeftBehind();
  redis_->Run({"ACL", "SETUSER", "sc", "on", ">pw", "~*", "+@all", "-xgroup|delconsumer"});
  SidecarConfig c = PodB("1h");
  c.redis_extra = "  username: sc\n  password: pw\n";
  auto b = StartSidecar(c, kFirstPassAtOnce);
  ASSERT_TRUE(WaitReady()) << b->Logs();
  ASSERT_TRUE(
      Eventually([&] { return !LogLines(b->Logs(), "consumer reaping").empty(); }, seconds(10)))
      << b->Logs();
  // Beats go on (every 300 ms); reaping does not come back, and delivery goes on.
  std::this_thread::sleep_for(seconds(2));
  for (int i = 0; i < 3; ++i) Add({"n", "after-" + std::to_string(i)});
  ASSERT_TRUE(handler_.WaitForCount(6, seconds(10))) << b->Logs();
  EXPECT_FALSE(b->Wait(std::chrono::milliseconds(0)).has_value()) << b->Logs();  // still running
  const auto lines = LogLines(b->Logs(), "consumer reaping");
  ASSERT_EQ(lines.size(), 1u) << b->Logs();
  rapidjson::Document d;
  d.Parse(lines[0].c_str());
  EXPECT_EQ(std::string(d["level"].GetString()), "error") << lines[0];
  EXPECT_EQ(std::string(d["subscription"].GetString()), "orders/billing") << lines[0];
  EXPECT_EQ(std::string(d["command"].GetString()), "EVALSHA") << lines[0];
  EXPECT_NE(std::string(d["missing_acl_rule"].GetString()).find("+xgroup|delconsumer"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(Consumers().count("a"), 1u);
  EXPECT_EQ(Reaped(), 0);
}

}  // namespace
}  // namespace streamcar::testing
