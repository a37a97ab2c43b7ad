// One live process per consumer name (SPEC 4.7), with the real binary and a real redis-server:
// a second live process with the same name exits 1 naming the holder, or waits with
// consumer.wait_for_name; a killed holder's name is taken at once by the same pod and within one
// expiry by another; a holder that froze past its lease posts and acknowledges nothing after it
// wakes; a Redis restart that loses the lease does not stop its holder. Most cases shorten the
// lease to 1.5 s (STREAMCAR_CONSUMER_LEASE) so that each takes a few seconds.

#include <algorithm>
#include <atomic>
#include <thread>

#include "tests/e2e/e2e_fixture.h"
#include "tests/support/redis_monitor.h"

namespace streamcar::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kShortLease[] = "STREAMCAR_CONSUMER_LEASE=1500ms";
constexpr milliseconds kLease{1500};

class ExclusivityTest : public E2eTest {
 protected:
  // A sidecar of pod `pod` ("": no POD_UID) whose requests go to the handler's /<path>.
  std::unique_ptr<SidecarProcess> Start(const std::string& path, const std::string& pod, bool peer,
                                        const std::string& consumer_extra = "",
                                        bool short_lease = true) {
    SidecarConfig c;
    c.handler_url = handler_.url("/" + path);
    c.handler_extra = "timeout: 10s, concurrency: 4";
    c.consumer_extra = consumer_extra;
    std::vector<std::string> env;
    if (short_lease) env.emplace_back(kShortLease);
    if (!pod.empty()) env.push_back("POD_UID=" + pod);
    return peer ? StartPeer(c, env) : StartSidecar(c, env);
  }

  size_t RequestsTo(const std::string& path) {
    const auto all = handler_.Requests();
    return static_cast<size_t>(
        std::count_if(all.begin(), all.end(), [&](const auto& r) { return r.path == "/" + path; }));
  }

  std::string LeaseKey() { return "{orders}:consumer:billing:c1:7:2:lease"; }

  static double SecondsSince(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
};

TEST_F(ExclusivityTest, ASecondLiveProcessWithTheNameExitsOneNamingTheHolderFast) {
  auto first = Start("a", "pod-a", /*peer=*/false);
  ASSERT_TRUE(WaitReady()) << first->Logs();
  // The lease: the key keys::ConsumerLeaseKey spells, holding the first's instance.
  EXPECT_EQ(redis_->Run({"HGET", LeaseKey(), "instance"}).view().Str(), "pod-a");

  const auto started = Clock::now();
  auto second = Start("b", "pod-b", /*peer=*/true);
  second->ExpectExit(1);
  ASSERT_EQ(second->Wait(seconds(10)), 1) << second->Logs();
  // A renewal (every third of the lease) is seen within about half of it, plus the start.
  EXPECT_LT(SecondsSince(started), 3.0);
  const std::string logs = second->Logs();
  EXPECT_NE(logs.find("is held by a live process, instance \\\"pod-a\\\""), std::string::npos)
      << logs;
  EXPECT_NE(logs.find("consumer.wait_for_name"), std::string::npos) << logs;

  // The holder goes on alone; the second never sent anything.
  const std::string id = Add({"n", "1"});
  ASSERT_TRUE(
      Eventually([&] { return RequestsFor(id).size() == 1 && PendingCount() == 0; }, seconds(10)))
      << first->Logs();
  EXPECT_EQ(RequestsTo("b"), 0u);
}

TEST_F(ExclusivityTest, WaitForNameWaitsNotReadyThenTakesOverWhenTheHolderStops) {
  auto first = Start("a", "pod-a", /*peer=*/false);
  ASSERT_TRUE(WaitReady()) << first->Logs();
  auto second = Start("b", "pod-b", /*peer=*/true, "  wait_for_name: true\n");
  // Longer than a live holder takes to be seen: it waits, not ready, sending nothing.
  std::this_thread::sleep_for(milliseconds(2000));
  ASSERT_TRUE(second->running()) << second->Logs();
  EXPECT_EQ(HttpGet(second->admin_port(), "/readyz").first, 503);
  EXPECT_NE(second->Logs().find("waiting for it (consumer.wait_for_name)"), std::string::npos)
      << second->Logs();
  const std::string before = Add({"n", "before"});
  ASSERT_TRUE(Eventually([&] { return RequestsFor(before).size() == 1 && PendingCount() == 0; },
                         seconds(10)));
  EXPECT_EQ(RequestsTo("b"), 0u);

  // SIGTERM: the holder drains and releases its lease; the waiter takes it at its next look.
  first->Terminate();
  ASSERT_EQ(first->Wait(seconds(15)), 0) << first->Logs();
  // Released, not left to expire: renewed every 0.5 s, it would still hold a second or more.
  EXPECT_NE(redis_->Run({"HGET", LeaseKey(), "instance"}).view().Str(), "pod-a");
  ASSERT_TRUE(WaitReady(seconds(10), second->admin_port())) << second->Logs();
  EXPECT_EQ(redis_->Run({"HGET", LeaseKey(), "instance"}).view().Str(), "pod-b");
  const std::string after = Add({"n", "after"});
  ASSERT_TRUE(Eventually([&] { return RequestsFor(after).size() == 1 && PendingCount() == 0; },
                         seconds(10)))
      << second->Logs();
  EXPECT_EQ(RequestsFor(after)[0].path, "/b");
}

// kill -9 while holding entries, then a restart: the same pod (POD_UID) takes the name at once,
// with the default 6 s lease; another instance waits for the lease to run out, no longer.
TEST_F(ExclusivityTest, KillNineThenTheSamePodTakesTheNameAtOnceAnotherWithinOneExpiry) {
  std::atomic<bool> hang{true};
  handler_.SetBehaviour([&](const ReceivedRequest&) {
    HandlerReply reply;
    if (hang) reply.delay = milliseconds(3000);
    return reply;
  });
  std::vector<std::string> held;
  for (int i = 0; i < 3; ++i) held.push_back(Add({"n", std::to_string(i)}));

  // The same pod, default lease (6 s): the restart drains its own pending entries at once.
  auto first = Start("a", "pod-a", /*peer=*/false, "", /*short_lease=*/false);
  ASSERT_TRUE(handler_.WaitForCount(3, seconds(10))) << first->Logs();
  first->Kill();
  hang = false;
  auto killed = Clock::now();
  auto restarted = Start("a", "pod-a", /*peer=*/false, "", /*short_lease=*/false);
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10))) << restarted->Logs();
  EXPECT_LT(SecondsSince(killed), 3.0) << "the same pod waited for its own lease";
  for (const auto& id : held) EXPECT_EQ(RequestsFor(id).size(), 2u) << id;
  EXPECT_NE(restarted->Logs().find("\"how\":\"own_pod\""), std::string::npos) << restarted->Logs();

  // Another instance (no POD_UID: host, pid and start time), 1.5 s lease.
  restarted->Kill();
  restarted.reset();
  redis_->Run({"DEL", LeaseKey()});
  hang = true;
  held.clear();
  for (int i = 0; i < 3; ++i) held.push_back(Add({"m", std::to_string(i)}));
  auto holder = Start("a", "", /*peer=*/false);
  ASSERT_TRUE(Eventually(
      [&] {
        return std::all_of(held.begin(), held.end(),
                           [&](const std::string& id) { return RequestsFor(id).size() == 1; });
      },
      seconds(10)))
      << holder->Logs();
  holder->Kill();
  hang = false;
  killed = Clock::now();
  auto other = Start("b", "", /*peer=*/true);
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10))) << other->Logs();
  const double took = SecondsSince(killed);
  // It waited for the lease (renewed at most a third of it before the kill) ...
  EXPECT_GT(took, 0.9) << other->Logs();
  // ... and took it within one expiry (plus the start and the drain).
  EXPECT_LT(took, 1.5 + 1.5) << other->Logs();
  for (const auto& id : held) {
    ASSERT_EQ(RequestsFor(id).size(), 2u) << id;
    EXPECT_EQ(RequestsFor(id)[1].path, "/b");
  }
  EXPECT_NE(other->Logs().find("waiting to see whether it is renewed"), std::string::npos)
      << other->Logs();
}

// The holder is SIGSTOPped with three answers on their way; another process takes the name once
// the lease runs out and settles those entries itself. The first, woken, must post and
// acknowledge nothing more: its answers arrived while it slept, and without the lease's gate it
// would acknowledge them at once.
TEST_F(ExclusivityTest, AHolderFrozenPastItsLeaseWakesAndSendsNothingMore) {
  handler_.SetBehaviour([](const ReceivedRequest& r) {
    HandlerReply reply;
    if (r.path == "/a") reply.delay = milliseconds(500);
    return reply;
  });
  auto first = Start("a", "pod-a", /*peer=*/false);
  ASSERT_TRUE(WaitReady()) << first->Logs();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Add({"n", std::to_string(i)}));
  ASSERT_TRUE(Eventually([&] { return RequestsTo("a") == 3; }, seconds(10))) << first->Logs();
  first->Pause();  // the answers come 500 ms later, into a frozen process

  auto second = Start("b", "pod-b", /*peer=*/true);
  ASSERT_TRUE(Eventually([&] { return RequestsTo("b") == 3 && PendingCount() == 0; }, seconds(10)))
      << second->Logs();
  // Past the lease, whatever the second's timing: nothing of the first is usable any more.
  std::this_thread::sleep_for(milliseconds(500));

  RedisMonitor monitor(redis_->port());
  ASSERT_TRUE(monitor.ok());
  const size_t posted_before = RequestsTo("a");
  first->Resume();
  first->ExpectExit(1);
  ASSERT_EQ(first->Wait(seconds(10)), 1) << first->Logs();
  const std::string logs = first->Logs();
  EXPECT_NE(logs.find("was taken by instance \\\"pod-b\\\""), std::string::npos) << logs;
  EXPECT_NE(logs.find("stopped before posting or acknowledging anything more"), std::string::npos)
      << logs;
  // Nothing posted, acknowledged, claimed, dead-lettered or undone after the wake (the second
  // had nothing to settle meanwhile).
  EXPECT_EQ(RequestsTo("a"), posted_before);
  for (const char* name : {"XACK", "XACKDEL", "XCLAIM", "XADD", "EVALSHA"}) {
    EXPECT_TRUE(monitor.Matching(name).empty())
        << name << ": " << (monitor.Matching(name).empty() ? "" : monitor.Matching(name)[0]);
  }
  // And the second holds the name and goes on.
  EXPECT_TRUE(second->running());
  const std::string id = Add({"n", "later"});
  ASSERT_TRUE(
      Eventually([&] { return RequestsFor(id).size() == 1 && PendingCount() == 0; }, seconds(10)));
  EXPECT_EQ(RequestsFor(id)[0].path, "/b");
}

// Redis restarts empty (no persistence): the lease is gone with everything else. The holder
// takes it again with its own token and instance and goes on; it does not exit.
TEST_F(ExclusivityTest, ARedisRestartThatLosesTheLeaseDoesNotStopItsHolder) {
  auto first = Start("a", "pod-a", /*peer=*/false);
  ASSERT_TRUE(WaitReady()) << first->Logs();
  const std::string token = std::string(redis_->Run({"HGET", LeaseKey(), "token"}).view().Str());
  ASSERT_FALSE(token.empty());
  redis_->Kill();
  std::this_thread::sleep_for(milliseconds(300));
  redis_->Start();
  ASSERT_TRUE(Eventually(
      [&] {
        return redis_->Run({"HGET", LeaseKey(), "token"}).view().Str() == token;
      },
      seconds(10)))
      << first->Logs();
  EXPECT_EQ(redis_->Run({"HGET", LeaseKey(), "instance"}).view().Str(), "pod-a");
  EXPECT_NE(first->Logs().find("was gone from Redis"), std::string::npos) << first->Logs();
  const std::string id = Add({"n", "after"});
  ASSERT_TRUE(
      Eventually([&] { return RequestsFor(id).size() == 1 && PendingCount() == 0; }, seconds(15)))
      << first->Logs();
  EXPECT_TRUE(first->running());
  // Still the live holder: another pod with the name is refused.
  auto second = Start("b", "pod-b", /*peer=*/true);
  second->ExpectExit(1);
  ASSERT_EQ(second->Wait(seconds(10)), 1) << second->Logs();
}

}  // namespace
}  // namespace streamcar::testing
