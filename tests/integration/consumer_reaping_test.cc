// Consumer reaping (SPEC 4.6) against a real redis-server: the listing, the pure choice of
// candidates, and the reap script, which re-checks inside Redis, atomically, before it removes
// anything. The consumers are made old for real (tests/support/consumer_aging.h): Redis measures
// idle time itself, so nothing here lowers the one-hour minimum.

#include "sidecar/redis/consumer_reaping.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/redis/session.h"
#include "sidecar/redis/stream_ops.h"
#include "tests/support/consumer_aging.h"
#include "tests/support/redis_server.h"

namespace streamcar::redis {
namespace {

using std::chrono::hours;
using testing::AgeConsumers;
using testing::RedisServer;

constexpr Millis kReapIdle{3'600'000};  // the least consumer.reap_idle

class ConsumerReapingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    session_ = std::make_unique<Session>(server_.ClientOptions(), "test", &health_);
    StopSignal stop;
    ASSERT_TRUE(session_->EnsureConnected(stop).ok());
    ASSERT_TRUE(session_->Run(ReapScript().Load()).ok());
    server_.Run({"XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"});
  }

  void CreateConsumer(const std::string& name) {
    server_.Run({"XGROUP", "CREATECONSUMER", "s", "g", name});
  }
  // `name` reads one new entry: it then has one pending, and its idle time starts again.
  void ReadOneAs(const std::string& name) {
    server_.Run({"XADD", "s", "*", "n", "1"});
    server_.Run({"XREADGROUP", "GROUP", "g", name, "COUNT", "1", "STREAMS", "s", ">"});
  }

  std::vector<ConsumerInfo> Consumers() {
    auto reply = session_->Run(ListConsumers("s", "g"));
    EXPECT_TRUE(reply.ok()) << reply.status().message();
    if (!reply.ok()) return {};
    auto parsed = ParseConsumers(reply->view());
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    return parsed.ok() ? *parsed : std::vector<ConsumerInfo>{};
  }
  std::optional<ConsumerInfo> Find(const std::string& name) {
    for (auto& consumer : Consumers()) {
      if (consumer.name == name) return consumer;
    }
    return std::nullopt;
  }

  // Whether the server counts every attempted read as activity (Redis 7.2+, Valkey, whose INFO
  // says redis_version:7.2.4) rather than only a read that brings entries (Redis 7.0).
  bool IdleCountsAttemptedReads() {
    const std::string info(server_.Run({"INFO", "server"}).view().Str());
    const auto at = info.find("redis_version:");
    EXPECT_NE(at, std::string::npos) << info;
    int major = 0;
    int minor = 0;
    EXPECT_EQ(std::sscanf(info.c_str() + at, "redis_version:%d.%d", &major, &minor), 2) << info;
    return major > 7 || (major == 7 && minor >= 2);
  }

  // The script as `caller` for `names`: one result per name.
  std::vector<ReapResult> Reap(const std::string& caller, const std::vector<std::string>& names) {
    auto reply = session_->Run(ReapConsumers("s", "g", caller, kReapIdle, names));
    EXPECT_TRUE(reply.ok()) << reply.status().message();
    if (!reply.ok()) return {};
    auto results = ParseReap(reply->view());
    EXPECT_TRUE(results.ok()) << results.status().message();
    return results.ok() ? *results : std::vector<ReapResult>{};
  }

  RedisServer server_;
  RedisHealth health_;
  std::unique_ptr<Session> session_;
};

TEST_F(ConsumerReapingTest, TheAgingHelperMakesARealConsumerTwoHoursIdle) {
  CreateConsumer("old");
  CreateConsumer("young");
  ReadOneAs("busy");
  AgeConsumers(server_, "s", {"old", "busy"}, hours(2));
  ASSERT_TRUE(Find("old") && Find("young") && Find("busy"));
  EXPECT_GE(Find("old")->idle_ms, 7'200'000);
  EXPECT_LT(Find("old")->idle_ms, 7'200'000 + 60'000);
  EXPECT_LT(Find("young")->idle_ms, 60'000);  // untouched
  EXPECT_GE(Find("busy")->idle_ms, 7'200'000);
  EXPECT_EQ(Find("busy")->pending, 1);  // its pending entry survives the RESTORE
  // The restored payload is a real one: its checksum is Redis's.
  EXPECT_TRUE(testing::DumpChecksumMatches(server_.Run({"DUMP", "s"}).view().Str()));
}

TEST_F(ConsumerReapingTest, RemovesAnOldIdleConsumerWithNothingPending) {
  CreateConsumer("old");
  CreateConsumer("me");
  AgeConsumers(server_, "s", {"old"}, hours(2));
  const auto candidates = ReapCandidates(Consumers(), "me", kReapIdle);
  ASSERT_EQ(candidates, std::vector<std::string>{"old"});
  const auto results = Reap("me", candidates);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].name, "old");
  EXPECT_EQ(results[0].verdict, ReapVerdict::kRemoved);
  EXPECT_GE(results[0].idle_ms, 7'200'000);
  EXPECT_FALSE(Find("old"));
  EXPECT_TRUE(Find("me"));
  // Asked again (a second replica's pass): it is gone, nothing else happens.
  const auto again = Reap("me", {"old"});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].verdict, ReapVerdict::kGone);
}

TEST_F(ConsumerReapingTest, KeepsAConsumerIdleForLessThanTheThreshold) {
  CreateConsumer("recent");
  AgeConsumers(server_, "s", {"recent"}, std::chrono::minutes(50));
  EXPECT_TRUE(ReapCandidates(Consumers(), "me", kReapIdle).empty());
  // Even when asked directly, the script looks for itself.
  const auto results = Reap("me", {"recent"});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].verdict, ReapVerdict::kActive);
  EXPECT_GE(results[0].idle_ms, 3'000'000);
  EXPECT_TRUE(Find("recent"));
}

TEST_F(ConsumerReapingTest, KeepsAnOldConsumerThatHoldsPendingEntries) {
  ReadOneAs("holder");
  AgeConsumers(server_, "s", {"holder"}, hours(2));
  EXPECT_TRUE(ReapCandidates(Consumers(), "me", kReapIdle).empty());
  const auto results = Reap("me", {"holder"});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].verdict, ReapVerdict::kPending);
  EXPECT_EQ(results[0].pending, 1);
  ASSERT_TRUE(Find("holder"));
  EXPECT_EQ(Find("holder")->pending, 1);
  EXPECT_EQ(server_.Run({"XPENDING", "s", "g"}).view()[0].Integer(), 1);
}

TEST_F(ConsumerReapingTest, NeverRemovesItsOwnCaller) {
  CreateConsumer("me");
  AgeConsumers(server_, "s", {"me"}, hours(2));
  EXPECT_TRUE(ReapCandidates(Consumers(), "me", kReapIdle).empty());
  // The script refuses it too, old and empty as it is.
  const auto results = Reap("me", {"me"});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].verdict, ReapVerdict::kSelf);
  EXPECT_TRUE(Find("me"));
}

// The race the script closes: listed as idle with nothing pending, then the consumer reads an
// entry before the removal runs. Removing it would drop that entry from the pending list.
TEST_F(ConsumerReapingTest, AConsumerThatReadAnEntryAfterTheListingSurvives) {
  CreateConsumer("late");
  CreateConsumer("old");
  AgeConsumers(server_, "s", {"late", "old"}, hours(2));
  const auto candidates = ReapCandidates(Consumers(), "me", kReapIdle);
  ASSERT_EQ(candidates, (std::vector<std::string>{"late", "old"}));
  ReadOneAs("late");  // between the listing and the script
  const auto results = Reap("me", candidates);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].name, "late");
  EXPECT_EQ(results[0].verdict, ReapVerdict::kPending);
  EXPECT_EQ(results[0].pending, 1);
  EXPECT_LT(results[0].idle_ms, 60'000);
  EXPECT_EQ(results[1].name, "old");
  EXPECT_EQ(results[1].verdict, ReapVerdict::kRemoved);
  ASSERT_TRUE(Find("late"));
  EXPECT_EQ(Find("late")->pending, 1);
  EXPECT_FALSE(Find("old"));
}

// What the server counts as a consumer's activity, which the reaper's self-refresh rests on.
// Redis 7.0: a '>' read that finds nothing (BLOCK or not) and an XAUTOCLAIM that claims nothing
// leave the idle time growing, so a live consumer of a quiet stream looks idle. Redis 7.2+ and
// Valkey: `idle` is the time since the last attempted interaction, so each of those makes it
// young again. On both, a read of its own pending list (RefreshConsumer) makes it young, brings
// nothing and counts no delivery.
TEST_F(ConsumerReapingTest, OnlyARealReadRefreshesAQuietConsumer) {
  const bool attempts_count = IdleCountsAttemptedReads();
  CreateConsumer("quiet");
  const std::vector<std::vector<std::string>> empty_attempts = {
      {"XREADGROUP", "GROUP", "g", "quiet", "COUNT", "1", "STREAMS", "s", ">"},
      {"XREADGROUP", "GROUP", "g", "quiet", "COUNT", "1", "BLOCK", "50", "STREAMS", "s", ">"},
      {"XAUTOCLAIM", "s", "g", "quiet", "1000", "0-0"},
  };
  for (const auto& attempt : empty_attempts) {
    AgeConsumers(server_, "s", {"quiet"}, hours(2));
    server_.Run(attempt);
    if (attempts_count) {
      EXPECT_LT(Find("quiet")->idle_ms, 60'000) << attempt[0];
      EXPECT_FALSE(NeedsRefresh(Consumers(), "quiet", Millis(60'000))) << attempt[0];
    } else {
      EXPECT_GE(Find("quiet")->idle_ms, 7'200'000) << attempt[0];
      EXPECT_TRUE(NeedsRefresh(Consumers(), "quiet", Millis(60'000))) << attempt[0];
    }
  }

  AgeConsumers(server_, "s", {"quiet"}, hours(2));
  EXPECT_TRUE(NeedsRefresh(Consumers(), "quiet", Millis(60'000)));
  auto refreshed = session_->Run(RefreshConsumer("s", "g", "quiet"));
  ASSERT_TRUE(refreshed.ok()) << refreshed.status().message();
  auto entries = SubscriptionOps::ParseRead(refreshed->view());
  ASSERT_TRUE(entries.ok());
  EXPECT_TRUE(entries->empty());
  EXPECT_LT(Find("quiet")->idle_ms, 60'000);
  EXPECT_FALSE(NeedsRefresh(Consumers(), "quiet", Millis(60'000)));
  const auto results = Reap("me", {"quiet"});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].verdict, ReapVerdict::kActive);
}

// A consumer a peer removed is created again by its refresh (and by its next read anyway).
TEST_F(ConsumerReapingTest, TheRefreshCreatesAConsumerAPeerRemoved) {
  EXPECT_FALSE(Find("me"));
  EXPECT_TRUE(NeedsRefresh(Consumers(), "me", Millis(60'000)));
  ASSERT_TRUE(session_->Run(RefreshConsumer("s", "g", "me")).ok());
  ASSERT_TRUE(Find("me"));
  EXPECT_EQ(Find("me")->pending, 0);
}

}  // namespace
}  // namespace streamcar::redis
