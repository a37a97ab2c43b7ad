// Sharded subscriptions (SPEC 9, SHARDING.md) with the real binary against a real redis-server:
// every entry of every shard is delivered, in order per key, with its shard and fence; members
// split the shards; a killed member's shards move to the survivor with higher fences, and nothing
// is lost or left pending.

#include <rapidjson/document.h>

#include <functional>
#include <map>
#include <set>
#include <thread>

#include "sidecar/sharding/sharding_keys.h"
#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

constexpr int kShards = 4;

class ShardedTest : public E2eTest {
 protected:
  static bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!condition()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
  }

  SidecarConfig Sharded(const std::string& consumer) {
    SidecarConfig c;
    c.consumer = consumer;
    c.handler_extra = "timeout: 1s";
    // redis.command_timeout is 2s in the fixture: the session must be at least three times that.
    c.subscription_extra =
        "    sharding: { shards: " + std::to_string(kShards) +
        ", session_timeout: 6s, heartbeat_interval: 500ms, rebalance_timeout: 8s,"
        " drain_timeout: 3s, initial_delay: 0s, min_assignment_interval: 0s }\n";
    return c;
  }

  // Appends `count` entries spread over `keys` keys, each to its key's shard, with a sequence
  // number per key; returns how many went to each shard.
  std::map<int, int> Produce(int count, int keys, int first_seq = 0) {
    std::map<int, int> per_shard;
    for (int i = 0; i < count; ++i) {
      const std::string key = "k" + std::to_string(i % keys);
      const int shard = sharding::ShardOf(key, kShards);
      redis_->Run({"XADD", sharding::ShardKey("orders:{%d}", shard), "*", "key", key, "seq",
                   std::to_string(first_seq + i / keys)});
      ++per_shard[shard];
    }
    return per_shard;
  }

  struct Delivery {
    std::string key;
    int seq = 0;
    int shard = -1;
    int64_t fence = 0;
    std::string consumer;
  };
  std::vector<Delivery> Deliveries() {
    std::vector<Delivery> out;
    for (const ReceivedRequest& request : handler_.Requests()) {
      rapidjson::Document body;
      body.Parse(request.body.c_str());
      if (!body.IsObject() || !body.HasMember("payload")) continue;
      Delivery d;
      d.key = body["payload"]["key"].GetString();
      d.seq = std::stoi(body["payload"]["seq"].GetString());
      d.shard = std::stoi(request.Header("streamcar-shard"));
      d.fence = std::stoll(request.Header("streamcar-fence"));
      EXPECT_EQ(body["shard"].GetInt(), d.shard);
      EXPECT_EQ(body["fence"].GetInt64(), d.fence);
      out.push_back(d);
    }
    return out;
  }
  int64_t PendingOfShards() {
    int64_t pending = 0;
    for (int shard = 0; shard < kShards; ++shard) {
      auto reply = redis_->RunAllowingError(
          {"XPENDING", sharding::ShardKey("orders:{%d}", shard), "billing"});
      if (reply.view().IsArray()) pending += reply.view()[0].Integer();
    }
    return pending;
  }
};

TEST_F(ShardedTest, OneMemberDeliversEveryShardInOrderWithShardAndFence) {
  auto sidecar = StartSidecar(Sharded("c1"));
  Produce(40, 8);
  ASSERT_TRUE(handler_.WaitForCount(40, std::chrono::seconds(20))) << sidecar->Logs();
  std::map<std::string, int> last_seq;
  for (const Delivery& d : Deliveries()) {
    EXPECT_EQ(d.shard, sharding::ShardOf(d.key, kShards)) << d.key;
    EXPECT_GT(d.fence, 0);
    auto [it, first] = last_seq.emplace(d.key, d.seq);
    if (!first) {
      EXPECT_EQ(d.seq, it->second + 1) << "key " << d.key << " out of order";
      it->second = d.seq;
    }
  }
  EXPECT_EQ(last_seq.size(), 8u);
  EXPECT_TRUE(WaitUntil([&] { return PendingOfShards() == 0; }, std::chrono::seconds(5)));
}

TEST_F(ShardedTest, AKilledMembersShardsMoveToTheSurvivorAndNothingIsLost) {
  auto first = StartSidecar(Sharded("c1"));
  auto second = StartPeer(Sharded("c2"));
  Produce(40, 8);
  ASSERT_TRUE(handler_.WaitForCount(40, std::chrono::seconds(20)))
      << first->Logs() << second->Logs();
  first->Kill();
  Produce(40, 8, /*first_seq=*/5);
  // Every (key, seq) arrives; what the killed member had in flight may arrive twice
  // (at-least-once), so distinct deliveries are counted, not requests.
  auto distinct = [&] {
    std::set<std::pair<std::string, int>> seen;
    for (const Delivery& d : Deliveries()) seen.emplace(d.key, d.seq);
    return seen.size();
  };
  ASSERT_TRUE(WaitUntil([&] { return distinct() == 80; }, std::chrono::seconds(30)))
      << distinct() << " of 80\n"
      << second->Logs();
  // Every shard's fence is installed by the survivor now: the killed member's shards moved.
  auto holders = [&] {
    std::set<std::string> members;
    for (int shard = 0; shard < kShards; ++shard) {
      auto reply = redis_->Run(
          {"HGET", sharding::FenceKey(sharding::ShardKey("orders:{%d}", shard), "billing"),
           "member"});
      members.insert(reply.view().IsNil() ? "" : std::string(reply.view().Str()));
    }
    return members;
  };
  EXPECT_TRUE(WaitUntil([&] { return holders().size() == 1 && !holders().contains(""); },
                        std::chrono::seconds(20)));
  EXPECT_TRUE(WaitUntil([&] { return PendingOfShards() == 0; }, std::chrono::seconds(5)));
}

}  // namespace
}  // namespace streamcar::testing
