// Stalled owners (SHARDING.md B6.1) with the real binary, two members and a real redis-server: a
// handler that hangs on one key's entries for the shard's owner stalls that shard (entries wait,
// nothing is acknowledged). Within sharding.stall_timeout and a heartbeat or two the owner exports
// streamcar_shard_stalled 1 and `status` shows the shard stalled; the other shard, slow but
// acknowledging, and then idle, is not. Without revoke_stalled that is all; with it the other
// member takes the shard on a larger fence and delivers its entries, the stalled owner's late
// acknowledgement is refused by the fence, and the stalled owner stays in the group.

#include <rapidjson/document.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sidecar/keys/sharding_keys.h"
#include "tests/e2e/sharded_fixture.h"
#include "tests/support/request_gate.h"

namespace streamcar::testing {
namespace {

constexpr int kShards = 2;
constexpr auto kStall = std::chrono::milliseconds(1500);
constexpr auto kHeartbeat = std::chrono::milliseconds(300);
constexpr std::string_view kSub = "subscription=\"orders/billing\"";

class ShardedStallTest : public ShardedE2eTest {
 protected:
  ShardedStallTest() { shards_ = kShards; }

  // A member judging stalls after 1.5 s, heartbeating every 300 ms. The handler's timeout (5 s)
  // outlasts the detection and the takeover, so the hung request is still in flight when the
  // shard moves: its late answer is what the fence must refuse. Attempts are many, so the hung
  // entry is never dead-lettered (which would be progress).
  SidecarConfig Member(const std::string& consumer, bool revoke) const {
    ShardingTiming t;
    t.heartbeat_interval = "300ms";
    t.drain_timeout = "6s";
    t.rebalance_timeout = "8s";
    SidecarConfig c = Sharded(consumer, t);
    c.handler_extra = "timeout: 5s";
    c.max_attempts = 50;
    const std::string stall = std::string(", stall_timeout: 1500ms, revoke_stalled: ") +
                              (revoke ? "true" : "false") + " }\n";
    c.subscription_extra.replace(c.subscription_extra.rfind(" }\n"), 3, stall);
    return c;
  }

  // The handler holds every request for `key` that carries the first fence it saw for that key
  // (the first owner's) until `gate_` opens; it answers requests of `slow_shard` after `delay`,
  // everything else at once.
  void HangOn(const std::string& key, int slow_shard = -1,
              std::chrono::milliseconds delay = std::chrono::milliseconds(0)) {
    handler_.SetBehaviour(
        [gate = gate_, key, hung = hung_, slow_shard, delay](const ReceivedRequest& request) {
          HandlerReply reply;
          if (request.Header("streamcar-shard") == std::to_string(slow_shard)) reply.delay = delay;
          rapidjson::Document body;
          body.Parse(request.body.c_str());
          if (body.IsObject() && body.HasMember("payload") &&
              body["payload"]["key"].GetString() == key) {
            const std::string fence = request.Header("streamcar-fence");
            bool hang = false;
            {
              std::lock_guard lock(hung->mutex);
              if (hung->fence.empty()) hung->fence = fence;
              hang = hung->fence == fence;
            }
            if (hang) gate->Hold(std::chrono::seconds(20));
          }
          return reply;
        });
  }
  std::string HungFence() {
    std::lock_guard lock(hung_->mutex);
    return hung_->fence;
  }

  // streamcar_shard_stalled of `shard`, summed over both members (its owner exports it).
  double Stalled(int shard, const std::vector<int>& ports) {
    double sum = 0;
    for (int port : ports) {
      sum += MetricSum(Metrics(port), "streamcar_shard_stalled",
                       {std::string(kSub), "shard=\"" + std::to_string(shard) + "\""});
    }
    return sum;
  }
  // The `status --json` state of `shard`.
  std::string StatusState(const std::string& path, int shard) {
    auto json = RunStreamcar({"status", "-c", path, "--json"});
    rapidjson::Document doc;
    doc.Parse(json.out.c_str());
    if (json.exit_code != 0 || !doc.IsObject()) return "?";
    for (const auto& row : doc["subscriptions"][0]["sharded"]["shard_list"].GetArray()) {
      if (row["shard"].GetInt() == shard) return row["state"].GetString();
    }
    return "?";
  }

  struct Hung {
    std::mutex mutex;
    std::string fence;
  };
  std::shared_ptr<RequestGate> gate_ = std::make_shared<RequestGate>();
  OpenAtExit open_at_exit_{gate_};
  std::shared_ptr<Hung> hung_ = std::make_shared<Hung>();
};

TEST_F(ShardedStallTest, AHungShardIsReportedStalledAndNotRevokedWithoutRevokeStalled) {
  auto first = StartSidecar(Member("c1", false));
  auto second = StartPeer(Member("c2", false));
  const std::vector<int> ports = {admin_port_, second->admin_port()};
  ASSERT_TRUE(WaitUntil([&] { return Settled(2); }, std::chrono::seconds(15)))
      << first->Logs() << second->Logs();
  const int hung = keys::ShardOf("k0", kShards);
  const int slow = 1 - hung;
  const std::string owner = Hash(Coordinator().owner)[std::to_string(hung)];
  const int64_t fence = InstalledFences()[hung];
  constexpr int kKeys = 10;
  int on_slow = 0;
  for (int k = 0; k < kKeys; ++k)
    on_slow += keys::ShardOf("k" + std::to_string(k), kShards) == slow;
  ASSERT_GE(on_slow, 2);
  // The other shard's entries are answered one at a time, slowly: about 2.1 s with entries
  // waiting, longer than the stall timeout, and an acknowledgement at least every 0.53 s.
  HangOn("k0", slow, std::chrono::milliseconds(2100 / (2 * on_slow)));
  const auto produced = Produce(2 * kKeys, kKeys);  // k0's first entry is its shard's first
  // Polled: the handler's own WaitFor looks again only when a request arrives.
  ASSERT_TRUE(WaitUntil([&] { return !HungFence().empty(); }, std::chrono::seconds(10)));
  const auto hung_at = std::chrono::steady_clock::now();

  // The slow shard is never stalled, while it delivers and once it is idle.
  double slow_stalled = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        slow_stalled = std::max(slow_stalled, Stalled(slow, ports));
        return Stalled(hung, ports) == 1;
      },
      std::chrono::seconds(8)))
      << Metrics(admin_port_) << first->Logs() << second->Logs();
  const auto took = std::chrono::steady_clock::now() - hung_at;
  EXPECT_LT(took, kStall + 5 * kHeartbeat + std::chrono::milliseconds(500))
      << "marked within the stall timeout and a heartbeat or two";
  EXPECT_GE(took, kStall - kHeartbeat);
  ASSERT_TRUE(WaitUntil(
      [&] {
        slow_stalled = std::max(slow_stalled, Stalled(slow, ports));
        for (const Produced& p : Undelivered(produced)) {
          if (p.shard == slow) return false;
        }
        return true;
      },
      std::chrono::seconds(10)));
  // Its deliveries spanned more than the stall timeout: slow progress was judged, and passed.
  std::vector<std::chrono::steady_clock::time_point> slow_at;
  for (const ReceivedRequest& request : handler_.Requests()) {
    if (request.Header("streamcar-shard") == std::to_string(slow)) slow_at.push_back(request.at);
  }
  ASSERT_FALSE(slow_at.empty());
  EXPECT_GT(slow_at.back() - slow_at.front(), kStall);
  std::this_thread::sleep_for(kStall);  // and then idle for as long
  EXPECT_EQ(std::max(slow_stalled, Stalled(slow, ports)), 0);
  const std::string path = WriteConfig(Member("c1", false));
  EXPECT_EQ(StatusState(path, hung), "stalled");
  EXPECT_EQ(StatusState(path, slow), "active");
  auto table = RunStreamcar({"status", "-c", path});
  EXPECT_NE(table.out.find(" stalled "), std::string::npos) << table.out;

  // Only reported: a few heartbeats later the owner still holds the shard on its fence.
  std::this_thread::sleep_for(4 * kHeartbeat);
  EXPECT_EQ(Hash(Coordinator().owner)[std::to_string(hung)], owner);
  EXPECT_EQ(InstalledFences()[hung], fence);
  for (const auto& event : CoordinatorEvents()) {
    EXPECT_FALSE(event.type == "revoke" && event.Field("reason") == "stalled") << event.id;
  }
  EXPECT_GE(CountByType(CoordinatorEvents())["stalled"], 1);
  EXPECT_EQ(Stalled(hung, ports), 1);

  // The handler answers: progress, so no longer stalled, and everything is delivered.
  gate_->Open();
  EXPECT_TRUE(WaitUntil([&] { return Stalled(hung, ports) == 0; }, std::chrono::seconds(5)));
  EXPECT_TRUE(WaitUntil([&] { return Undelivered(produced).empty() && PendingOfShards() == 0; },
                        std::chrono::seconds(10)));
}

TEST_F(ShardedStallTest, WithRevokeStalledAnotherMemberTakesTheShardAndTheStalledAckIsFenced) {
  auto first = StartSidecar(Member("c1", true));
  auto second = StartPeer(Member("c2", true));
  const std::vector<int> ports = {admin_port_, second->admin_port()};
  ASSERT_TRUE(WaitUntil([&] { return Settled(2); }, std::chrono::seconds(15)))
      << first->Logs() << second->Logs();
  const int hung = keys::ShardOf("k0", kShards);
  const std::string stalled_member = FenceHolders()[hung];
  const int64_t old_fence = InstalledFences()[hung];
  HangOn("k0");
  const auto produced = Produce(12, 6);
  // Polled: the handler's own WaitFor looks again only when a request arrives.
  ASSERT_TRUE(WaitUntil([&] { return !HungFence().empty(); }, std::chrono::seconds(10)));
  const auto hung_at = std::chrono::steady_clock::now();
  ASSERT_EQ(HungFence(), std::to_string(old_fence));

  // The other member installs a larger fence on the shard.
  ASSERT_TRUE(WaitUntil(
      [&] { return FenceHolders()[hung] != stalled_member && InstalledFences()[hung] > old_fence; },
      std::chrono::seconds(10)))
      << first->Logs() << second->Logs();
  EXPECT_LT(std::chrono::steady_clock::now() - hung_at,
            kStall + 6 * kHeartbeat + std::chrono::milliseconds(500));
  const int64_t new_fence = InstalledFences()[hung];
  bool revoked_for_stall = false;
  for (const auto& event : CoordinatorEvents()) {
    revoked_for_stall |= event.type == "revoke" && event.Field("reason") == "stalled" &&
                         event.Field("member") == stalled_member &&
                         event.Field("shard") == std::to_string(hung);
  }
  EXPECT_TRUE(revoked_for_stall);

  // The stalled owner's request, still in flight, now succeeds: its acknowledgement is refused.
  gate_->Open();
  EXPECT_TRUE(WaitUntil(
      [&] {
        double refused = 0;
        for (int port : ports) {
          refused += MetricSum(Metrics(port), "streamcar_fenced_ops_total",
                               {std::string(kSub), "op=\"ack\""});
        }
        return refused >= 1;
      },
      std::chrono::seconds(8)))
      << first->Logs() << second->Logs();

  // The new owner delivers every entry of the shard, the hung one included, on its fence.
  ASSERT_TRUE(WaitUntil([&] { return Undelivered(produced).empty() && PendingOfShards() == 0; },
                        std::chrono::seconds(15)))
      << first->Logs() << second->Logs();
  std::set<std::string> on_new_fence;
  for (const Delivery& d : Deliveries()) {
    if (d.shard == hung && d.fence == new_fence) on_new_fence.insert(d.id);
  }
  for (const Produced& p : produced) {
    if (p.shard != hung) continue;
    EXPECT_TRUE(on_new_fence.contains(p.id)) << p.key << " " << p.seq;
  }
  // The stalled member, whose every shard stalled, is still in the group.
  std::this_thread::sleep_for(2 * kHeartbeat);
  EXPECT_TRUE(Hash(Coordinator().members).contains(stalled_member));
  EXPECT_EQ(CountByType(CoordinatorEvents())["fenced"], 0);
}

}  // namespace
}  // namespace streamcar::testing
