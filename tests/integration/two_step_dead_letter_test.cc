// The two-step dead letter (SPEC 8: an explicit dead_letter.stream in another slot than the
// stream, where the one-step script would be refused with CROSSSLOT) of one subscription loop,
// against a real redis-server and a real HTTP handler. The path is forced
// (SubscriptionDeps::dead_letter_two_step) on a standalone server, which serves both keys: what
// is looked at is the order of the steps and what a failure between them leaves behind.

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/common/log.h"
#include "sidecar/config/config.h"
#include "sidecar/runtime/subscription_loop.h"
#include "tests/support/redis_server.h"
#include "tests/support/sidecar_process.h"
#include "tests/support/test_handler.h"

namespace streamcar::runtime {
namespace {

using std::chrono::seconds;
using testing::Eventually;
using testing::HandlerReply;
using testing::RedisServer;
using testing::TestHandler;

constexpr const char* kDlqClient = "streamcar:c1:orders/billing:dlq";
constexpr const char* kSettleClient = "streamcar:c1:orders/billing:settle";

class DeadLetterPathTest : public ::testing::Test {
 protected:
  DeadLetterPathTest() {
    sub_.name = "orders/billing";
    sub_.stream = "orders";
    sub_.group = "billing";
    sub_.start = "beginning";
    sub_.handler.url = handler_.url("/");
    sub_.handler.timeout = Millis(2000);
    sub_.retry.max_attempts = 3;
    sub_.dead_letter.stream = "orders:dlq";
    sub_.claim.min_idle = Millis(60000);
    sub_.claim.interval = Millis(10000);
    handler_.SetBehaviour([](const testing::ReceivedRequest&) {
      HandlerReply reply;
      reply.status = 422;  // in reject_statuses: dead-lettered at once
      reply.body = "no such account";
      return reply;
    });
    SetLogSinkForTest([this](std::string_view line) {
      std::lock_guard<std::mutex> lock(log_mutex_);
      logs_.emplace_back(line);
    });
  }
  ~DeadLetterPathTest() override { SetLogSinkForTest(nullptr); }

  SubscriptionDeps Deps(bool two_step) {
    SubscriptionDeps deps;
    deps.redis = redis_.ClientOptions();
    deps.redis.command_timeout = Millis(2000);
    deps.redis_health = &health_;
    deps.metrics = &metrics_;
    deps.watchdog = &watchdog_;
    deps.consumer_name = "c1";
    deps.dead_letter_two_step = two_step;
    deps.group_ready = [this] { ++groups_ready_; };
    deps.fatal = [](const Status& status) { ADD_FAILURE() << "fatal: " << status.message(); };
    return deps;
  }

  std::string Add(const std::string& value) {
    return std::string(redis_.Run({"XADD", "orders", "*", "n", value}).view().Str());
  }
  int64_t Pending() { return redis_.Run({"XPENDING", "orders", "billing"}).view()[0].Integer(); }
  int64_t Letters() { return redis_.Run({"XLEN", "orders:dlq"}).view().Integer(); }
  // The streamcar.id of every dead letter.
  std::vector<std::string> LetterIds() {
    std::vector<std::string> ids;
    auto reply = redis_.Run({"XRANGE", "orders:dlq", "-", "+"});
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      auto fields = reply.view()[i][1];
      for (size_t k = 0; k + 1 < fields.Size(); k += 2) {
        if (fields[k].Str() == "streamcar.id") ids.emplace_back(fields[k + 1].Str());
      }
    }
    return ids;
  }
  // The id of the connection named `name` in CLIENT LIST, or "" when there is none.
  std::string ClientId(const std::string& name) {
    std::istringstream list{std::string(redis_.Run({"CLIENT", "LIST"}).view().Str())};
    std::string line;
    while (std::getline(list, line)) {
      if (line.find(" name=" + name + " ") == std::string::npos) continue;
      const size_t at = line.find("id=");
      return line.substr(at + 3, line.find(' ', at) - at - 3);
    }
    return "";
  }
  double Counter(prometheus::Counter* counter) { return counter->Value(); }
  admin::SubscriptionMetrics& Sub() { return metrics_.ForSubscription("orders/billing"); }
  double Failures(const char* c) { return Sub().SettleFailed(c)->Value(); }
  double Rejected() { return Sub().DeadLettered(delivery::DeadLetterReason::kRejected)->Value(); }
  size_t Logged(const std::vector<std::string>& parts) {
    std::lock_guard<std::mutex> lock(log_mutex_);
    size_t n = 0;
    for (const auto& line : logs_) {
      bool all = true;
      for (const auto& part : parts) all = all && line.find(part) != std::string::npos;
      if (all) ++n;
    }
    return n;
  }
  static void Stop(SubscriptionLoop& loop) {
    loop.RequestStopIntake();
    loop.JoinIntake();
    loop.WaitForDeliveries(SteadyClock::now() + seconds(5));
    loop.FinishSettling(SteadyClock::now());
  }

  RedisServer redis_;
  TestHandler handler_;
  config::Subscription sub_;
  redis::RedisHealth health_;
  admin::Metrics metrics_;
  admin::Watchdog watchdog_;
  std::atomic<int> groups_ready_{0};
  std::mutex log_mutex_;
  std::vector<std::string> logs_;
};

// One letter, the same record, the same metrics and the same log line on either path; only the
// two-step path opens a connection of its own for the dead-letter stream.
class EitherPathTest : public DeadLetterPathTest, public ::testing::WithParamInterface<bool> {};

TEST_P(EitherPathTest, OneLetterTheOriginalAcknowledgedAndCountedTheSame) {
  const bool two_step = GetParam();
  SubscriptionLoop loop(sub_, Deps(two_step));
  ASSERT_TRUE(loop.Start().ok());
  ASSERT_TRUE(Eventually([&] { return groups_ready_ == 1; }, seconds(10)));
  const std::string id = Add("42");
  ASSERT_TRUE(Eventually([&] { return Pending() == 0 && Letters() == 1; }, seconds(10)));
  const redis::Reply range = redis_.Run({"XRANGE", "orders:dlq", "-", "+"});
  auto letter = range.view()[0][1];
  std::vector<std::string> fields;
  for (size_t k = 0; k < letter.Size(); ++k) fields.emplace_back(letter[k].Str());
  ASSERT_EQ(fields.size(), 18u);
  fields.pop_back();  // streamcar.time: when
  EXPECT_EQ(fields,
            (std::vector<std::string>{"n", "42", "streamcar.stream", "orders", "streamcar.id", id,
                                      "streamcar.group", "billing", "streamcar.attempts", "1",
                                      "streamcar.reason", "rejected", "streamcar.status", "422",
                                      "streamcar.error", "no such account", "streamcar.time"}));
  EXPECT_EQ(ClientId(kDlqClient).empty(), !two_step)
      << "the dead-letter stream's own connection exists only for the two-step path";
  Stop(loop);
  EXPECT_EQ(Letters(), 1);
  EXPECT_EQ(Rejected(), 1);
  EXPECT_EQ(Counter(Sub().acked), 1);
  EXPECT_EQ(Failures("definite") + Failures("ambiguous") + Failures("lost_lease"), 0);
  EXPECT_EQ(Logged({"\"msg\":\"entry dead-lettered\"", "\"id\":\"" + id + "\"",
                    "\"reason\":\"rejected\"", "\"attempts\":1", "\"status\":\"422\""}),
            1u);
}

INSTANTIATE_TEST_SUITE_P(Paths, EitherPathTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("TwoStep") : std::string("OneStep");
                         });

// Step 3 refused (no script may run): the letter is written once and stays written; each retry
// repeats only the acknowledgement, and a lost stream connection between the steps loses
// nothing and writes no second letter.
TEST_F(DeadLetterPathTest, ARefusedAcknowledgementIsRetriedAloneAcrossAReconnect) {
  SubscriptionLoop loop(sub_, Deps(true));
  ASSERT_TRUE(loop.Start().ok());
  ASSERT_TRUE(Eventually([&] { return groups_ready_ == 1; }, seconds(10)));
  redis_.Run({"ACL", "SETUSER", "default", "-evalsha"});
  Add("42");
  ASSERT_TRUE(Eventually([&] { return Letters() == 1 && Failures("definite") >= 2; }, seconds(10)))
      << "written, then its acknowledgement refused at least twice";
  EXPECT_EQ(Letters(), 1) << "never written again";
  EXPECT_EQ(Pending(), 1);
  const std::string settle = ClientId(kSettleClient);
  ASSERT_FALSE(settle.empty());
  redis_.Run({"CLIENT", "KILL", "ID", settle});
  redis_.Run({"ACL", "SETUSER", "default", "+evalsha"});
  ASSERT_TRUE(Eventually([&] { return Pending() == 0; }, seconds(10)));
  EXPECT_NE(ClientId(kSettleClient), settle) << "reconnected";
  EXPECT_EQ(Letters(), 1);
  Stop(loop);
  EXPECT_EQ(Letters(), 1);
  EXPECT_EQ(Rejected(), 1);
  EXPECT_EQ(Failures("ambiguous") + Failures("lost_lease"), 0);
}

// The process ends between the XADD and the acknowledgement: the entry is still pending, and the
// next run settles it. A second letter is allowed; a lost one never.
TEST_F(DeadLetterPathTest, AnEndBetweenWriteAndAcknowledgementLosesNoLetter) {
  std::string id;
  {
    SubscriptionLoop loop(sub_, Deps(true));
    ASSERT_TRUE(loop.Start().ok());
    ASSERT_TRUE(Eventually([&] { return groups_ready_ == 1; }, seconds(10)));
    redis_.Run({"ACL", "SETUSER", "default", "-evalsha"});
    id = Add("42");
    ASSERT_TRUE(
        Eventually([&] { return Letters() == 1 && Failures("definite") >= 1; }, seconds(10)));
    Stop(loop);
  }
  EXPECT_EQ(Pending(), 1) << "written, not acknowledged";
  redis_.Run({"ACL", "SETUSER", "default", "+evalsha"});
  SubscriptionLoop again(sub_, Deps(true));
  ASSERT_TRUE(again.Start().ok());
  ASSERT_TRUE(Eventually([&] { return Pending() == 0; }, seconds(10)));
  Stop(again);
  const auto ids = LetterIds();
  EXPECT_GE(ids.size(), 1u);
  EXPECT_LE(ids.size(), 2u);
  for (const auto& letter : ids) EXPECT_EQ(letter, id);
}

}  // namespace
}  // namespace streamcar::runtime
