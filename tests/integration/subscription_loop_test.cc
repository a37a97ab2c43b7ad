// One subscription on its event loop, in process, against a real redis-server and a real HTTP
// handler: delivery and acknowledgement, one thread per subscription, a retry through Redis, and
// the staged stop (SPEC 4.5) with a request in flight and past the drain deadline. The real
// binary's behaviour is covered by the e2e suites; these tests look at what only the process can
// see.

#include "sidecar/runtime/subscription_loop.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/config/config.h"
#include "tests/support/redis_server.h"
#include "tests/support/sidecar_process.h"
#include "tests/support/test_handler.h"

namespace streamcar::runtime {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Eventually;
using testing::HandlerReply;
using testing::RedisServer;
using testing::TestHandler;

// Threads of this process whose name starts with `prefix` (the test's own HTTP handler runs a
// thread pool, so the process's total says nothing here; the e2e suite counts the binary's).
size_t ThreadsNamed(const std::string& prefix) {
  size_t n = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind(prefix, 0) == 0) ++n;
  }
  closedir(dir);
  return n;
}

// CPU seconds (user + system) of the threads whose name starts with `prefix`.
double CpuSecondsOfThreadsNamed(const std::string& prefix) {
  double total = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string task = std::string("/proc/self/task/") + e->d_name;
    std::ifstream comm(task + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind(prefix, 0) != 0) continue;
    std::ifstream stat(task + "/stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 13; ++i) fields >> field;  // state .. cmajflt
    long utime = 0, stime = 0;                      // NOLINT(google-runtime-int): /proc's type
    fields >> utime >> stime;
    total += static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  closedir(dir);
  return total;
}

class SubscriptionLoopTest : public ::testing::Test {
 protected:
  SubscriptionLoopTest() {
    sub_.name = "orders/billing";
    sub_.stream = "orders";
    sub_.group = "billing";
    sub_.start = "beginning";
    sub_.handler.url = handler_.url("/");
    sub_.handler.timeout = Millis(2000);
    sub_.handler.concurrency = 4;
    sub_.retry.max_attempts = 3;
    sub_.retry.initial_backoff = Millis(50);
    sub_.retry.max_backoff = Millis(200);
    sub_.retry.jitter = 0;
    sub_.dead_letter.stream = "orders:dlq";
    sub_.claim.min_idle = Millis(60000);
    sub_.claim.interval = Millis(10000);
  }

  SubscriptionDeps Deps() {
    SubscriptionDeps deps;
    deps.redis = redis_.ClientOptions();
    deps.redis.command_timeout = Millis(2000);
    deps.redis_health = &health_;
    deps.metrics = &metrics_;
    deps.watchdog = &watchdog_;
    deps.consumer_name = "c1";
    deps.group_ready = [this] { ++groups_ready_; };
    deps.fatal = [this](const Status& status) { ADD_FAILURE() << "fatal: " << status.message(); };
    return deps;
  }

  std::string Add(const std::string& value) {
    return std::string(redis_.Run({"XADD", "orders", "*", "n", value}).view().Str());
  }
  int64_t Pending() {
    auto reply = redis_.RunAllowingError({"XPENDING", "orders", "billing"});
    if (reply.IsError()) return -1;
    return reply.view()[0].Integer();
  }

  RedisServer redis_;
  TestHandler handler_;
  config::Subscription sub_;
  redis::RedisHealth health_;
  admin::Metrics metrics_;
  admin::Watchdog watchdog_;
  std::atomic<int> groups_ready_{0};
};

TEST_F(SubscriptionLoopTest, DeliversAcknowledgesOnOneThread) {
  SubscriptionLoop loop(sub_, Deps());
  ASSERT_TRUE(loop.Start().ok());
  ASSERT_TRUE(Eventually([&] { return groups_ready_ == 1; }, seconds(10)));
  std::vector<std::string> ids;
  for (int i = 0; i < 50; ++i) ids.push_back(Add(std::to_string(i)));
  ASSERT_TRUE(handler_.WaitForCount(50, seconds(10)));
  ASSERT_TRUE(Eventually([&] { return Pending() == 0; }, seconds(10)));
  // The subscription runs on one thread, named after it.
  EXPECT_EQ(ThreadsNamed("sc:orders/billi"), 1u);
  loop.RequestStopIntake();
  loop.JoinIntake();
  EXPECT_TRUE(loop.WaitForDeliveries(SteadyClock::now() + seconds(5)));
  loop.FinishSettling(SteadyClock::now() + seconds(5));
  EXPECT_EQ(loop.held(), 0u);
  EXPECT_EQ(ThreadsNamed("sc:"), 0u) << "the loop's thread ended with the stop";
  // Each entry was POSTed once.
  EXPECT_EQ(handler_.Count(), 50u);
}

TEST_F(SubscriptionLoopTest, AFailureIsRetriedThroughRedisThenAcknowledged) {
  std::atomic<int> calls{0};
  handler_.SetBehaviour([&](const testing::ReceivedRequest&) {
    HandlerReply reply;
    reply.status = ++calls < 3 ? 503 : 200;
    return reply;
  });
  SubscriptionLoop loop(sub_, Deps());
  ASSERT_TRUE(loop.Start().ok());
  const std::string id = Add("x");
  ASSERT_TRUE(handler_.WaitForCount(3, seconds(10)));
  ASSERT_TRUE(Eventually([&] { return Pending() == 0; }, seconds(10)));
  auto requests = handler_.Requests();
  ASSERT_EQ(requests.size(), 3u);
  // The retry claim counted each delivery in Redis: the handler saw attempts 1, 2, 3.
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i].Header("streamcar-id"), id);
    EXPECT_EQ(requests[i].Header("streamcar-attempts"), std::to_string(i + 1));
  }
}

TEST_F(SubscriptionLoopTest, TheStopWaitsForARequestInFlightAndAcknowledgesIt) {
  handler_.SetBehaviour([](const testing::ReceivedRequest&) {
    HandlerReply reply;
    reply.delay = milliseconds(700);
    return reply;
  });
  SubscriptionLoop loop(sub_, Deps());
  ASSERT_TRUE(loop.Start().ok());
  Add("slow");
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10)));
  const auto stop_began = SteadyClock::now();
  loop.RequestStopIntake();
  loop.JoinIntake();
  // The intake stop ends the blocking read at once, not after its 1 s block.
  EXPECT_LT(SteadyClock::now() - stop_began, milliseconds(900));
  EXPECT_TRUE(loop.WaitForDeliveries(SteadyClock::now() + seconds(5)));
  loop.FinishSettling(SteadyClock::now() + seconds(5));
  EXPECT_EQ(Pending(), 0);
  EXPECT_EQ(loop.held(), 0u);
}

TEST_F(SubscriptionLoopTest, PastTheDrainDeadlineTheRequestIsGivenUpAndStaysPending) {
  handler_.SetBehaviour([](const testing::ReceivedRequest&) {
    HandlerReply reply;
    reply.delay = milliseconds(3000);
    return reply;
  });
  sub_.handler.timeout = Millis(10000);
  SubscriptionLoop loop(sub_, Deps());
  ASSERT_TRUE(loop.Start().ok());
  Add("hangs");
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10)));
  loop.RequestStopIntake();
  loop.JoinIntake();
  const auto waited = SteadyClock::now();
  EXPECT_FALSE(loop.WaitForDeliveries(SteadyClock::now() + milliseconds(300)));
  loop.FinishSettling(SteadyClock::now() + milliseconds(300));
  // Promptly, and the entry is still this consumer's pending entry (delivered once).
  EXPECT_LT(SteadyClock::now() - waited, seconds(2));
  EXPECT_EQ(loop.held(), 1u);
  EXPECT_EQ(Pending(), 1);
}

// With Redis away, settlement work that is due (the keepalive, every claim.min_idle / 3) waits for
// the connection to come back; the loop sleeps meanwhile instead of re-arming a timer for "now".
TEST_F(SubscriptionLoopTest, WithRedisDownTheLoopSleeps) {
  sub_.claim.min_idle = Millis(300);  // a keepalive due every 100 ms
  handler_.SetBehaviour([](const testing::ReceivedRequest&) {
    HandlerReply reply;
    reply.delay = milliseconds(5000);  // held: the keepalive has an entry to extend
    return reply;
  });
  SubscriptionLoop loop(sub_, Deps());
  ASSERT_TRUE(loop.Start().ok());
  Add("held");
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10)));
  redis_.Kill();
  std::this_thread::sleep_for(milliseconds(300));  // the keepalive falls due meanwhile
  const double before = CpuSecondsOfThreadsNamed("sc:");
  std::this_thread::sleep_for(milliseconds(1500));
  const double spent = CpuSecondsOfThreadsNamed("sc:") - before;
  EXPECT_LT(spent, 0.3) << "the loop thread spun: " << spent << " s of CPU in 1.5 s";
  redis_.Start();
}

}  // namespace
}  // namespace streamcar::runtime
