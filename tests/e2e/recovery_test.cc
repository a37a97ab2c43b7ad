// Crashes and restarts (SPEC 4.1, 3.2 keepalive): the reclaim beat's cursor, leases for long
// handlers, a Redis restart, and entries that crashed a consumer every time. Recovering self and
// dead peers, on every topology: tests/e2e/guarantee_test.cc.

#include <set>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

class RecoveryTest : public E2eTest {};

// SPEC 4.1.4: the reclaim beat follows XAUTOCLAIM's cursor until 0-0 (room permitting), so a dead
// peer's backlog larger than one call (claim.count, and count*10 scanned per call) is taken in one
// beat, not claim.count entries per beat.
TEST_F(RecoveryTest, ReclaimFollowsTheCursorToTheEnd) {
  redis_->Run({"XGROUP", "CREATE", "orders", "billing", "0", "MKSTREAM"});
  std::vector<std::string> left;
  for (int i = 0; i < 60; ++i) {
    std::string id = Add({"n", std::to_string(i)});
    if (i % 2 == 1) left.push_back(id);
  }
  // A dead peer read all 60 and acknowledged every other one: 30 pending, interleaved with gaps.
  redis_->Run({"XREADGROUP", "GROUP", "billing", "dead", "COUNT", "100", "STREAMS", "orders", ">"});
  auto all = redis_->Run({"XRANGE", "orders", "-", "+"});
  for (size_t i = 0; i < all.view().Size(); i += 2)
    redis_->Run({"XACK", "orders", "billing", std::string(all.view()[i][0].Str())});
  ASSERT_EQ(PendingCount(), 30);
  SidecarConfig c;
  c.handler_extra = "concurrency: 16";  // room for 64: the whole backlog fits
  c.min_idle = "100ms";
  c.claim_interval = "3s";  // following the cursor: one beat; 2 per beat would take 45 s
  c.claim_count = 2;
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(20))) << sidecar->Logs();
  for (const auto& id : left) {
    auto requests = RequestsFor(id);
    ASSERT_EQ(requests.size(), 1u) << id;
    EXPECT_EQ(requests[0].Header("streamcar-attempts"), "2");
  }
  EXPECT_EQ(handler_.Count(), 30u);  // the acknowledged ones are not delivered again
  ASSERT_TRUE(WaitMetric("streamcar_claimed_total", {"source=\"autoclaim\""}, 30));
}

TEST_F(RecoveryTest, HandlerLongerThanMinIdleIsNotDeliveredTwice) {
  handler_.SetBehaviour([](const ReceivedRequest&) {
    HandlerReply reply;
    reply.delay = milliseconds(7000);  // longer than three min_idle periods
    return reply;
  });
  SidecarConfig c;
  c.min_idle = "2s";  // keepalive every ~667 ms: more than a second of margin on a loaded box
  c.claim_interval = "200ms";
  c.handler_extra = "timeout: 20s";
  auto one = StartSidecar(c);
  // A peer beating fast: it would steal the entry if its lease lapsed.
  SidecarConfig peer = c;
  peer.consumer = "peer";
  auto two = StartPeer(peer);
  ASSERT_TRUE(WaitReady()) << one->Logs();
  ASSERT_TRUE(WaitReady(seconds(15), two->admin_port())) << two->Logs();
  std::string id = Add({"slow", "1"});
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(15)))
      << one->Logs() << two->Logs();
  EXPECT_EQ(RequestsFor(id).size(), 1u);
}

TEST_F(RecoveryTest, RedisKilledAndRestartedLosesNothing) {
  redis_ = std::make_unique<RedisServer>(RedisServerOptions{.append_only = true});
  handler_.SetBehaviour([](const ReceivedRequest&) {
    HandlerReply reply;
    reply.delay = milliseconds(5);
    return reply;
  });
  SidecarConfig c;
  c.handler_extra = "concurrency: 4";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  std::set<std::string> ids;
  for (int i = 0; i < 200; ++i) ids.insert(Add({"n", std::to_string(i)}));
  ASSERT_TRUE(handler_.WaitForCount(50, seconds(10)));
  redis_->Kill();
  ASSERT_TRUE(Eventually([&] { return Metric("streamcar_redis_up") == 0; }, seconds(10)));
  EXPECT_EQ(HttpGet(admin_port_, "/readyz").first, 503);
  std::this_thread::sleep_for(milliseconds(500));
  redis_->Start();
  for (int i = 200; i < 300; ++i) ids.insert(Add({"n", std::to_string(i)}));
  // Every entry delivered at least once (the reader may still be in its reconnect backoff when
  // nothing is pending), and then nothing left pending.
  std::vector<std::string> missing;
  auto all_delivered = [&] {
    std::set<std::string> delivered;
    for (const auto& r : handler_.Requests()) delivered.insert(r.Header("streamcar-id"));
    missing.clear();
    for (const auto& id : ids) {
      if (!delivered.count(id)) missing.push_back(id);
    }
    return missing.empty();
  };
  EXPECT_TRUE(Eventually([&] { return all_delivered() && PendingCount() == 0; }, seconds(30)))
      << missing.size() << " never delivered, first " << (missing.empty() ? "" : missing.front())
      << "\n"
      << sidecar->Logs();
  EXPECT_EQ(Len("orders"), 300);
  EXPECT_EQ(Len("orders:dlq"), 0);
  ASSERT_TRUE(WaitReady());
  EXPECT_TRUE(sidecar->running());
}

TEST_F(RecoveryTest, EntryThatCrashedEveryConsumerIsDeadLetteredWithoutDelivery) {
  // Simulate three consumers that each read the entry and died: delivery count 4 > max_attempts 3.
  redis_->Run({"XGROUP", "CREATE", "orders", "billing", "0", "MKSTREAM"});
  std::string poison = Add({"poison", "1"});
  redis_->Run({"XREADGROUP", "GROUP", "billing", "c1", "STREAMS", "orders", ">"});
  for (int i = 0; i < 2; ++i) redis_->Run({"XCLAIM", "orders", "billing", "c1", "0", poison});
  auto sidecar = StartSidecar({});  // drains c1's PEL: count becomes 4
  ASSERT_TRUE(
      Eventually([&] { return Len("orders:dlq") == 1 && PendingCount() == 0; }, seconds(10)))
      << sidecar->Logs();
  EXPECT_TRUE(RequestsFor(poison).empty());
  auto letters = DeadLetters();
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].Get("streamcar.id"), poison);
  EXPECT_EQ(letters[0].Get("streamcar.reason"), "max_attempts");
  EXPECT_EQ(letters[0].Get("streamcar.attempts"), "4");
}

// The boundary of the rule above (SPEC 3.2: only attempts > max_attempts goes without another
// delivery): an entry whose drain makes its delivery count exactly max_attempts still has that
// last attempt, and is delivered once more.
TEST_F(RecoveryTest, EntryArrivingWithItsLastAttemptIsDeliveredOnceMore) {
  redis_->Run({"XGROUP", "CREATE", "orders", "billing", "0", "MKSTREAM"});
  std::string last = Add({"last", "1"});
  redis_->Run({"XREADGROUP", "GROUP", "billing", "c1", "STREAMS", "orders", ">"});
  redis_->Run({"XCLAIM", "orders", "billing", "c1", "0", last});
  auto sidecar = StartSidecar({});  // max_attempts 3; drains c1's PEL: count becomes 3
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10))) << sidecar->Logs();
  auto requests = RequestsFor(last);
  ASSERT_EQ(requests.size(), 1u) << sidecar->Logs();
  EXPECT_EQ(requests[0].Header("streamcar-attempts"), "3");
  EXPECT_EQ(Len("orders:dlq"), 0);
}

}  // namespace
}  // namespace streamcar::testing
