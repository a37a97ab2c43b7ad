// The reaping pass (runtime/consumer_reaper.h) on the event loop against a real redis-server: it
// removes old idle consumers and counts them, at most once per kEvery, loads its script again
// after NOSCRIPT, refreshes its own consumer when quiet, stops after the step outstanding, waits
// for its first pass's offset, and turns itself off (nothing removed) on an ACL refusal. The
// consumers are made old for real (tests/support/consumer_aging.h).

#include "sidecar/runtime/consumer_reaper.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <chrono>
#include <optional>

#include "sidecar/redis/connector.h"
#include "tests/support/consumer_aging.h"
#include "tests/support/redis_server.h"

namespace streamcar::runtime {
namespace {

using std::chrono::hours;
using testing::AgeConsumers;
using testing::RedisServer;

class ConsumerReaperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = EventLoop::Create(SystemClock::Instance());
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = std::move(*loop);
    connector_ = std::make_unique<redis::Connector>(*loop_);
    server_.Run({"XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"});
    server_.Run({"XGROUP", "CREATECONSUMER", "s", "g", "me"});
  }
  void TearDown() override {
    reaper_.reset();
    connection_.reset();
    connector_.reset();
    loop_.reset();
  }

  // A connection as `user` (default: none), ready.
  void Connect(const std::string& user = "", const std::string& password = "") {
    redis::ConnectionOptions options = server_.ClientOptions();
    options.username = user;
    options.password = password;
    connection_ = std::make_unique<redis::AsyncConnection>(
        *loop_, *connector_, options, "read", nullptr, std::span<const redis::Script* const>{});
    ASSERT_TRUE(RunUntil([&] { return connection_->ready(); }));
    reaper_ = std::make_unique<ConsumerReaper>("s/g", "s", "g", "me", Millis(3'600'000),
                                               first_pass_at_, &reaped_);
  }

  bool RunUntil(const std::function<bool()>& condition, Millis timeout = Millis(10000)) {
    const SteadyTime deadline = SteadyClock::now() + timeout;
    while (!condition()) {
      if (SteadyClock::now() >= deadline) return false;
      loop_->RunOnce(Millis(20));
    }
    return true;
  }

  // One pass to its end; false when it did not end.
  bool Pass(SteadyTime now = SteadyClock::now()) {
    bool ended = false;
    reaper_->Run(connection_.get(), now, [&] { ended = true; });
    EXPECT_TRUE(RunUntil([&] { return ended; }));
    return ended;
  }

  std::optional<int64_t> IdleOf(const std::string& name) {
    const auto reply = server_.Run({"XINFO", "CONSUMERS", "s", "g"});
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      const auto row = reply.view()[i];
      if (row[1].Str() == name) return row[5].Integer();  // name, n, pending, n, idle, n
    }
    return std::nullopt;
  }

  RedisServer server_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<redis::Connector> connector_;
  std::unique_ptr<redis::AsyncConnection> connection_;
  prometheus::Counter reaped_;
  SteadyTime first_pass_at_{};  // the reaper's first pass is due from then (Connect)
  std::unique_ptr<ConsumerReaper> reaper_;
};

TEST_F(ConsumerReaperTest, RemovesOldIdleConsumersCountsThemAndRunsAtMostOncePerMinute) {
  for (const char* name : {"old-1", "old-2", "young"}) {
    server_.Run({"XGROUP", "CREATECONSUMER", "s", "g", name});
  }
  AgeConsumers(server_, "s", {"old-1", "old-2"}, hours(2));
  Connect();
  const SteadyTime start = SteadyClock::now();
  EXPECT_TRUE(reaper_->Due(start));
  ASSERT_TRUE(Pass(start));
  EXPECT_EQ(reaped_.Value(), 2);
  EXPECT_FALSE(IdleOf("old-1"));
  EXPECT_FALSE(IdleOf("old-2"));
  EXPECT_TRUE(IdleOf("young"));
  EXPECT_TRUE(IdleOf("me"));
  // The next pass: a minute after this one began, timed by the caller's (the loop's) clock.
  EXPECT_FALSE(reaper_->Due(start + Millis(59'999)));
  EXPECT_TRUE(reaper_->Due(start + ConsumerReaper::kEvery));
}

TEST_F(ConsumerReaperTest, LoadsItsScriptAgainAfterNoscript) {
  server_.Run({"XGROUP", "CREATECONSUMER", "s", "g", "old"});
  AgeConsumers(server_, "s", {"old"}, hours(2));
  Connect();
  server_.Run({"SCRIPT", "FLUSH"});  // and the connection never loaded it: NOSCRIPT first
  ASSERT_TRUE(Pass());
  EXPECT_EQ(reaped_.Value(), 1);
  EXPECT_FALSE(IdleOf("old"));
}

TEST_F(ConsumerReaperTest, RefreshesItsOwnConsumerWhenQuiet) {
  AgeConsumers(server_, "s", {"me"}, hours(2));
  Connect();
  ASSERT_TRUE(Pass());
  ASSERT_TRUE(IdleOf("me"));
  EXPECT_LT(*IdleOf("me"), 60'000);
  EXPECT_FALSE(reaper_->TakeRecoveryRequest());  // it brought nothing
  EXPECT_EQ(reaped_.Value(), 0);
}

TEST_F(ConsumerReaperTest, AStopEndsThePassBeforeItRemovesAnything) {
  server_.Run({"XGROUP", "CREATECONSUMER", "s", "g", "old"});
  AgeConsumers(server_, "s", {"old"}, hours(2));
  Connect();
  bool ended = false;
  reaper_->Run(connection_.get(), SteadyClock::now(), [&] { ended = true; });
  reaper_->Stop();  // the listing is outstanding
  ASSERT_TRUE(RunUntil([&] { return ended; }));
  EXPECT_TRUE(IdleOf("old"));
  EXPECT_EQ(reaped_.Value(), 0);
  EXPECT_FALSE(reaper_->Due(SteadyClock::now() + hours(1)));
}

// An ACL refusal turns reaping off for good, having removed nothing; other failures are only
// logged, and the next pass comes a kEvery later.
TEST_F(ConsumerReaperTest, AnAclRefusalTurnsReapingOffOtherFailuresDoNot) {
  server_.Run({"XGROUP", "CREATECONSUMER", "s", "g", "old"});
  AgeConsumers(server_, "s", {"old"}, hours(2));
  server_.Run({"ACL", "SETUSER", "narrow", "on", ">pw", "~*", "+@all", "-xgroup|delconsumer"});
  Connect("narrow", "pw");
  const SteadyTime start = SteadyClock::now();
  ASSERT_TRUE(Pass(start));
  EXPECT_TRUE(reaper_->turned_off());
  EXPECT_FALSE(reaper_->Due(start + ConsumerReaper::kEvery));
  EXPECT_FALSE(reaper_->Due(start + hours(24)));
  EXPECT_TRUE(IdleOf("old"));
  EXPECT_EQ(reaped_.Value(), 0);
  // A group that is gone is only logged: reaping stays on, nothing is counted.
  Connect();
  server_.Run({"DEL", "s"});
  EXPECT_TRUE(Pass(start));
  EXPECT_FALSE(reaper_->turned_off());
  EXPECT_TRUE(reaper_->Due(start + ConsumerReaper::kEvery));
  EXPECT_EQ(reaped_.Value(), 0);
}

// The first pass waits for its offset (the replicas of a rollout spread their first passes over
// a kEvery); then one per kEvery from the last.
TEST_F(ConsumerReaperTest, TheFirstPassWaitsForItsOffset) {
  const SteadyTime start = SteadyClock::now();
  first_pass_at_ = start + Millis(42'000);
  Connect();
  EXPECT_FALSE(reaper_->Due(start));
  EXPECT_FALSE(reaper_->Due(start + Millis(41'999)));
  EXPECT_TRUE(reaper_->Due(start + Millis(42'000)));
  ASSERT_TRUE(Pass(start + Millis(42'000)));
  EXPECT_FALSE(reaper_->Due(start + Millis(42'000) + ConsumerReaper::kEvery - Millis(1)));
  EXPECT_TRUE(reaper_->Due(start + Millis(42'000) + ConsumerReaper::kEvery));
}

}  // namespace
}  // namespace streamcar::runtime
