// The member driver (sidecar/sharding/sharded_subscription.h) in process, against a real
// redis-server and a real HTTP handler: grants taken and shards delivered, the leave on stop, two
// members sharing the shards, the local lease lost when heartbeats go unanswered or the lease
// clock jumps (a suspended host), a forgotten heartbeat script, and a leave with Redis gone.
// What the coordinator decided is read from its own keys; what the member did, from its metrics.

#include "sidecar/sharding/sharded_subscription.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/config/config.h"
#include "sidecar/keys/sharding_keys.h"
#include "tests/support/redis_server.h"
#include "tests/support/sidecar_process.h"
#include "tests/support/test_handler.h"

namespace streamcar::sharding {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Eventually;
using testing::HandlerReply;
using testing::MetricValue;
using testing::RedisServer;
using testing::TestHandler;

constexpr int kShards = 4;

// A lease clock that a test moves forward from its own thread (a host that slept): the steady
// clock plus an offset.
class JumpingClock final : public Clock {
 public:
  SteadyTime Now() const override { return SteadyClock::now() + Millis(offset_ms_.load()); }
  int64_t WallMillis() const override { return SystemClock::Instance().WallMillis(); }
  void Jump(Millis by) { offset_ms_ += by.count(); }

 private:
  std::atomic<int64_t> offset_ms_{0};
};

// One member's process-wide parts: its metrics, watchdog and Redis health.
struct MemberParts {
  admin::Metrics metrics;
  admin::Watchdog watchdog;
  redis::RedisHealth health;
  std::atomic<int> ready{0};

  double Metric(const std::string& name, const std::vector<std::string>& labels = {}) const {
    return MetricValue(metrics.Serialize(), name, labels);
  }
  double Owned() const { return Metric("streamcar_shards_owned"); }
  bool InState(const std::string& state) const {
    return Metric("streamcar_coord_member_state", {"state=\"" + state + "\""}) == 1;
  }
};

class ShardedSubscriptionTest : public ::testing::Test {
 protected:
  ShardedSubscriptionTest() : keys_(keys::CoordinatorKeysFor("orders", "billing")) {
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
    sub_.claim.min_idle = Millis(60000);
    sub_.claim.interval = Millis(10000);
    sub_.sharding.shards = kShards;
    // Within config validation's rules: an interval and a command timeout at most a third of
    // the session, a rebalance longer than a drain and two intervals.
    sub_.sharding.session_timeout = Millis(3000);
    sub_.sharding.heartbeat_interval = Millis(300);
    sub_.sharding.rebalance_timeout = Millis(8000);
    sub_.sharding.drain_timeout = Millis(2000);
    sub_.sharding.initial_delay = Millis(0);
    sub_.sharding.min_assignment_interval = Millis(0);
  }

  std::unique_ptr<ShardedSubscription> Member(MemberParts& parts, const std::string& id,
                                              const Clock* lease_clock = nullptr) {
    runtime::SubscriptionDeps deps;
    deps.redis = redis_.ClientOptions();
    deps.redis.command_timeout = Millis(1000);
    deps.redis_health = &parts.health;
    deps.metrics = &parts.metrics;
    deps.watchdog = &parts.watchdog;
    deps.consumer_name = id + "-pod";
    deps.fatal = [](const Status& status) { ADD_FAILURE() << "fatal: " << status.message(); };
    auto member = std::make_unique<ShardedSubscription>(
        sub_, std::move(deps), id, [&parts] { ++parts.ready; }, lease_clock);
    EXPECT_TRUE(member->Start().ok());
    return member;
  }

  // The coordinator's current grants: shard -> member id.
  std::map<int, std::string> Owners() const {
    const redis::Reply reply = redis_.Run({"HGETALL", keys_.owner});
    std::map<int, std::string> owners;
    for (size_t i = 0; i + 1 < reply.view().Size(); i += 2) {
      owners[std::stoi(std::string(reply[i].Str()))] = std::string(reply[i + 1].Str());
    }
    return owners;
  }
  size_t OwnedBy(const std::string& id) const {
    size_t n = 0;
    for (const auto& [shard, owner] : Owners()) n += owner == id;
    return n;
  }
  bool IsMember(const std::string& id) const {
    return redis_.Run({"HEXISTS", keys_.members, id}).view().Integer() == 1;
  }
  std::string ShardStream(int shard) const { return keys::ShardKey(sub_.ShardKeyPattern(), shard); }
  void AddToEachShard(const std::string& value) {
    for (int shard = 0; shard < kShards; ++shard) {
      redis_.Run({"XADD", ShardStream(shard), "*", "n", value});
    }
  }
  int64_t Pending(int shard) const {
    auto reply = redis_.RunAllowingError({"XPENDING", ShardStream(shard), "billing"});
    return reply.IsError() ? -1 : reply.view()[0].Integer();
  }
  bool NothingPending() const {
    for (int shard = 0; shard < kShards; ++shard) {
      if (Pending(shard) != 0) return false;
    }
    return true;
  }

  RedisServer redis_;
  TestHandler handler_;
  config::Subscription sub_;
  const keys::CoordinatorKeys keys_;
};

TEST_F(ShardedSubscriptionTest, TakesEveryGrantAndDeliversEachShard) {
  MemberParts parts;
  auto member = Member(parts, "m1");
  ASSERT_TRUE(Eventually([&] { return OwnedBy("m1") == kShards; }, seconds(10)));
  ASSERT_TRUE(Eventually([&] { return parts.Owned() == kShards; }, seconds(10)));
  // Stable once every shard's takeover is done (reconciling until then).
  EXPECT_TRUE(Eventually([&] { return parts.InState("stable"); }, seconds(10)));
  AddToEachShard("a");
  ASSERT_TRUE(handler_.WaitForCount(kShards, seconds(10)));
  ASSERT_TRUE(Eventually([&] { return NothingPending(); }, seconds(10)));
  // Each request names its shard and the grant's fence; every shard had one.
  std::map<std::string, int> by_shard;
  for (const auto& request : handler_.Requests()) ++by_shard[request.Header("streamcar-shard")];
  EXPECT_EQ(by_shard.size(), static_cast<size_t>(kShards));
  // Ready once, after the first accepted heartbeat, however many followed.
  EXPECT_EQ(parts.ready.load(), 1);
  EXPECT_EQ(parts.Metric("streamcar_coord_heartbeats_total", {"status=\"error\""}), 0);
}

TEST_F(ShardedSubscriptionTest, LeavesOnStopAfterDrainingTheRequestInFlight) {
  handler_.SetBehaviour([](const testing::ReceivedRequest&) {
    HandlerReply reply;
    reply.delay = milliseconds(700);
    return reply;
  });
  MemberParts parts;
  auto member = Member(parts, "m1");
  ASSERT_TRUE(Eventually([&] { return parts.Owned() == kShards; }, seconds(10)));
  redis_.Run({"XADD", ShardStream(1), "*", "n", "slow"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10)));
  const SteadyTime began = SteadyClock::now();
  member->Leave(began + seconds(10));
  member->Join();
  // The drain let the request finish and its ack go; the leave reached the coordinator, so
  // nobody waits a session for the shards.
  EXPECT_LT(SteadyClock::now() - began, seconds(5));
  EXPECT_EQ(Pending(1), 0);
  EXPECT_FALSE(IsMember("m1"));
  EXPECT_TRUE(Owners().empty());
  EXPECT_EQ(member->held(), 0u);
  EXPECT_EQ(handler_.Count(), 1u);
}

TEST_F(ShardedSubscriptionTest, ASecondMemberGetsItsShareAndTheFirstGetsAllBackWhenItLeaves) {
  MemberParts first_parts;
  MemberParts second_parts;
  auto first = Member(first_parts, "m1");
  ASSERT_TRUE(Eventually([&] { return OwnedBy("m1") == kShards; }, seconds(10)));
  auto second = Member(second_parts, "m2");
  // The first drains what the target moves and the second takes it over.
  ASSERT_TRUE(Eventually([&] { return OwnedBy("m1") == 2 && OwnedBy("m2") == 2; }, seconds(15)));
  ASSERT_TRUE(Eventually([&] { return first_parts.Owned() == 2 && second_parts.Owned() == 2; },
                         seconds(10)));
  EXPECT_EQ(first_parts.Metric("streamcar_rebalances_total", {"kind=\"revoke\""}), 2);
  AddToEachShard("b");
  ASSERT_TRUE(handler_.WaitForCount(kShards, seconds(10)));
  ASSERT_TRUE(Eventually([&] { return NothingPending(); }, seconds(10)));
  second->Leave(SteadyClock::now() + seconds(10));
  second->Join();
  EXPECT_FALSE(IsMember("m2"));
  ASSERT_TRUE(Eventually([&] { return OwnedBy("m1") == kShards; }, seconds(10)));
  EXPECT_EQ(handler_.Count(), static_cast<size_t>(kShards)) << "each entry once";
}

TEST_F(ShardedSubscriptionTest, UnansweredHeartbeatsLoseTheLeaseAndTheMemberRejoinsAfter) {
  MemberParts parts;
  auto member = Member(parts, "m1");
  ASSERT_TRUE(Eventually([&] { return parts.Owned() == kShards; }, seconds(10)));
  // Redis stops answering (its process is stopped): the lease ends 0.8 x the session after the
  // last answered heartbeat was sent, and every shard goes with it.
  redis_.Signal(SIGSTOP);
  const SteadyTime stopped = SteadyClock::now();
  ASSERT_TRUE(Eventually([&] { return parts.InState("lost"); }, seconds(10)));
  EXPECT_LT(SteadyClock::now() - stopped, milliseconds(3000 + 1000));
  EXPECT_GE(SteadyClock::now() - stopped, milliseconds(2400 - 300 - 200));
  EXPECT_EQ(parts.Metric("streamcar_coord_fenced_total", {"reason=\"local_lease\""}), 1);
  EXPECT_EQ(parts.Owned(), 0);
  redis_.Signal(SIGCONT);
  EXPECT_GE(parts.Metric("streamcar_coord_heartbeats_total", {"status=\"error\""}), 1);
  // Back: the member rejoins with epoch 0 and is granted the shards again.
  ASSERT_TRUE(Eventually([&] { return parts.Owned() == kShards; }, seconds(15)));
  AddToEachShard("c");
  ASSERT_TRUE(handler_.WaitForCount(kShards, seconds(10)));
}

TEST_F(ShardedSubscriptionTest, TheLeaseEndsByTheLeaseClockNotBySteadyTime) {
  sub_.sharding.session_timeout = Millis(6000);  // a lease of 4.8 s of steady time
  JumpingClock lease_clock;
  MemberParts parts;
  auto member = Member(parts, "m1", &lease_clock);
  ASSERT_TRUE(Eventually([&] { return parts.Owned() == kShards; }, seconds(10)));
  // The host slept (CLOCK_BOOTTIME went on, steady time did not) and Redis does not answer the
  // heartbeat that follows: the member may not deliver on a lease its clock says has ended, so
  // the first unanswered heartbeat (a command timeout, 1 s) drops every shard.
  redis_.Signal(SIGSTOP);
  const SteadyTime stopped = SteadyClock::now();
  lease_clock.Jump(seconds(10));
  ASSERT_TRUE(Eventually([&] { return parts.InState("lost"); }, seconds(10)));
  EXPECT_LT(SteadyClock::now() - stopped, milliseconds(3500));
  EXPECT_EQ(parts.Metric("streamcar_coord_fenced_total", {"reason=\"local_lease\""}), 1);
  EXPECT_EQ(parts.Owned(), 0);
  redis_.Signal(SIGCONT);
  // It rejoins and is granted every shard again.
  ASSERT_TRUE(Eventually([&] { return parts.Owned() == kShards; }, seconds(15)));
  AddToEachShard("d");
  ASSERT_TRUE(handler_.WaitForCount(kShards, seconds(10)));
  ASSERT_TRUE(Eventually([&] { return NothingPending(); }, seconds(10)));
}

TEST_F(ShardedSubscriptionTest, AFlushedHeartbeatScriptIsLoadedAgain) {
  MemberParts parts;
  auto member = Member(parts, "m1");
  ASSERT_TRUE(Eventually([&] { return parts.Owned() == kShards; }, seconds(10)));
  const double ok_before = parts.Metric("streamcar_coord_heartbeats_total", {"status=\"OK\""});
  redis_.Run({"SCRIPT", "FLUSH"});
  ASSERT_TRUE(Eventually(
      [&] {
        return parts.Metric("streamcar_coord_heartbeats_total", {"status=\"OK\""}) >= ok_before + 3;
      },
      seconds(10)));
  // NOSCRIPT was answered by a load and the call again, within the same heartbeat.
  EXPECT_EQ(parts.Metric("streamcar_coord_heartbeats_total", {"status=\"error\""}), 0);
  EXPECT_EQ(parts.Metric("streamcar_coord_fenced_total", {"reason=\"local_lease\""}), 0);
  EXPECT_EQ(OwnedBy("m1"), static_cast<size_t>(kShards));
}

TEST_F(ShardedSubscriptionTest, LeavingWithRedisGoneEndsWithoutWaitingOutTheDeadline) {
  MemberParts parts;
  auto member = Member(parts, "m1");
  ASSERT_TRUE(Eventually([&] { return parts.Owned() == kShards; }, seconds(10)));
  redis_.Kill();
  const SteadyTime began = SteadyClock::now();
  member->Leave(began + seconds(30));
  member->Join();
  // The drains end, Redis stays out of reach for a heartbeat interval and a command timeout,
  // and the leave that cannot be told is given up: the coordinator expires the member instead.
  EXPECT_LT(SteadyClock::now() - began, seconds(12));
  EXPECT_EQ(member->held(), 0u);
}

// While Redis is out of reach no heartbeat reaches it: none is timed (the duration histogram is
// Redis latency eating the lease, SHARDING.md C1) or counted as an answer; once it is back, the
// member's heartbeats are answered and timed again.
TEST_F(ShardedSubscriptionTest, HeartbeatsThatNeverReachRedisAreNotTimed) {
  MemberParts parts;
  auto member = Member(parts, "m1");
  ASSERT_TRUE(Eventually([&] { return parts.Owned() == kShards; }, seconds(10)));
  const char* timed = "streamcar_coord_heartbeat_duration_seconds_count";
  redis_.Kill();
  // A beat already under way may have been written: let it end, then count from there.
  std::this_thread::sleep_for(seconds(2));
  const double before = parts.Metric(timed);
  std::this_thread::sleep_for(seconds(3));  // ten heartbeat intervals, each a failed beat
  EXPECT_EQ(parts.Metric(timed), before);
  redis_.Start();
  EXPECT_TRUE(Eventually([&] { return parts.Metric(timed) > before; }, seconds(15)));
}

TEST_F(ShardedSubscriptionTest, AStolenFenceDropsTheShardAndTheCoordinatorGrantsItAgain) {
  MemberParts parts;
  auto member = Member(parts, "m1");
  ASSERT_TRUE(Eventually([&] { return parts.Owned() == kShards; }, seconds(10)));
  // A newer owner's fence (as after a lease this member did not know it lost): the shard's next
  // fenced step is refused, the member drops the shard and tells the coordinator.
  const std::string fence = keys::FenceKey(ShardStream(2), "billing");
  redis_.Run({"HSET", fence, "token", "999999"});
  redis_.Run({"XADD", ShardStream(2), "*", "n", "after the steal"});
  const auto refused = [&] {
    double n = 0;
    for (const char* op : {"read", "ack", "claim", "retry", "dead_letter", "install"}) {
      n += parts.Metric("streamcar_fenced_ops_total", {"op=\"" + std::string(op) + "\""});
    }
    return n;
  };
  ASSERT_TRUE(Eventually([&] { return refused() >= 1; }, seconds(10)));
  // Nothing goes out under a fence older than the stolen one (the coordinator may repair the
  // conflict with a newer grant meanwhile).
  std::this_thread::sleep_for(seconds(1));
  for (const auto& request : handler_.Requests()) {
    EXPECT_GT(std::stoll(request.Header("streamcar-fence")), 999999) << request.body;
  }
}

}  // namespace
}  // namespace streamcar::sharding
