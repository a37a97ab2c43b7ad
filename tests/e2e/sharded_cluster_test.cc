// Sharded subscriptions on a real Redis Cluster (SHARDING.md B1, B5.1, B10.6; issue 15): three
// masters with a replica each, the real binary, two members of one sharded subscription (S = 8).
//
// - At start, `run` asks the cluster (CLUSTER KEYSLOT) whether each shard's stream, fence and
//   dead-letter keys share one slot; mode auto meeting a cluster with a key pattern that splits
//   them, or puts every shard in one slot, is a configuration error (exit 2) naming the shard and
//   its keys.
// - The shard streams land on different masters; every entry is delivered with Streamcar-Shard
//   and Streamcar-Fence, first deliveries in id order per shard; each takeover's install is
//   followed by WAIT 1 on the shard's master (INFO commandstats).
// - The coordinator's master (the one holding sc:{<stream>:billing}:*) fails over mid-run, by
//   CLUSTER FAILOVER on its replica and by kill -9. Producers write every shard throughout (an
//   entry written on the faulted master counts only when WAIT saw a replica take it: Redis may
//   lose the rest on kill -9). Nothing confirmed is lost, every shard's PEL ends empty, the
//   installed fences only move forward, both members hold their shards again, and the longest
//   stretch a shard went without a first delivery (the stall, I3 as a number) stays within the
//   cluster's settle time plus I3's bound for this configuration plus 3 s for a loaded machine.
//   The figures are logged as one JSON line per fault.
// - The coordinator's master and its replica hang longer than the session: the members rejoin
//   and every shard is taken over again, with the same checks.
//
// One cluster for the whole suite when run as one process (ctest runs each case in its own, with
// a cluster of its own: about 2 s each); each test has its own stream and group names. About
// 50-60 s in all. Plain stage only: six redis-servers and timing mean nothing under
// sanitizers.

#include <rapidjson/document.h>

#include <iostream>
#include <set>

#include "sidecar/keys/sharding_keys.h"
#include "tests/e2e/topology_e2e.h"
#include "tests/support/redis_cluster.h"

namespace streamcar::testing {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kShards = 8;
// The timing of the members (session 6 s, heartbeat 500 ms, drain 3 s, no initial delay nor
// minimum assignment interval). SHARDING.md B9 I3: max(session, drain) + 2 x heartbeat +
// min_assignment_interval, plus the takeover.
constexpr char kShardingBlock[] =
    "    sharding: { shards: 8, session_timeout: 6s, heartbeat_interval: 500ms,"
    " rebalance_timeout: 8s, drain_timeout: 3s, initial_delay: 0s,"
    " min_assignment_interval: 0s";
constexpr milliseconds kI3Bound{6000 + 2 * 500};

// "ms-seq" as a pair, for id order.
std::pair<int64_t, int64_t> IdOrder(const std::string& id) {
  const size_t dash = id.find('-');
  return {std::stoll(id.substr(0, dash)), std::stoll(id.substr(dash + 1))};
}

class ShardedClusterTest : public TopologyE2eTest {
 protected:
  static void SetUpTestSuite() {
    if (UnderSanitizer()) return;
    cluster_ = new RedisCluster();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  void SetUp() override {
    if (UnderSanitizer()) GTEST_SKIP() << "six redis-servers, failovers, timing: plain stage only";
    ASSERT_NE(cluster_, nullptr);
    // A node an earlier test killed comes back (as a replica of its successor): 3 + 3 again.
    for (int i = 0; i < cluster_->size(); ++i) {
      if (!cluster_->node(i).running()) cluster_->Restart(i);
    }
    ASSERT_FALSE(HasFatalFailure());
    // Each test counts its own WAITs.
    for (int i = 0; i < cluster_->size(); ++i) cluster_->RunOn(i, {"CONFIG", "RESETSTAT"});
    handler_.SetBehaviour([this](const ReceivedRequest& r) {
      deliveries_.Record(r);
      Seen seen{
          .stream = r.Header("streamcar-stream"),
          .id = r.Header("streamcar-id"),
          .shard =
              r.Header("streamcar-shard").empty() ? -1 : std::stoi(r.Header("streamcar-shard")),
          .fence =
              r.Header("streamcar-fence").empty() ? -1 : std::stoll(r.Header("streamcar-fence"))};
      std::lock_guard lock(seen_mutex_);
      seen_.push_back(std::move(seen));
      return HandlerReply{};
    });
  }
  void TearDown() override {
    for (auto& producer : producers_) producer->Stop();
    TopologyE2eTest::TearDown();
  }

  std::vector<int> Ports() const {
    std::vector<int> ports;
    for (int i = 0; i < cluster_->size(); ++i) ports.push_back(cluster_->node(i).port());
    return ports;
  }
  std::string Shard(int shard) const {
    return keys::ShardKey(keys::DefaultKeyPattern(stream_), shard);
  }
  keys::CoordinatorKeys Coordinator() const { return keys::CoordinatorKeysFor(stream_, "billing"); }

  TopologyConfig Config(const std::string& consumer, const std::string& mode = "cluster",
                        const std::string& sharding_extra = "") const {
    TopologyConfig config;
    config.consumer = consumer;
    config.redis = "  url: " + cluster_->SeedUrl() + "\n  mode: " + mode +
                   "\n  nodes: " + cluster_->NodesYaml() + "\n  command_timeout: 2s\n";
    // Entries are delivered again after a failover (an ack that did not reach the replica):
    // retries are not counted against them (max_attempts 0).
    config.subscriptions.push_back({.name = "sharded",
                                    .stream = stream_,
                                    .handler_extra = "timeout: 1s",
                                    .extra = std::string(kShardingBlock) + sharding_extra + " }\n",
                                    .max_attempts = 0});
    return config;
  }

  // HGET on the node serving `key`; "" for nil.
  std::string HGet(const std::string& key, const std::string& field) {
    auto reply = cluster_->Run(key, {"HGET", key, field});
    return reply.view().IsString() ? std::string(reply.view().Str()) : "";
  }
  // The installed fence token of `shard` (0: none yet).
  int64_t InstalledFence(int shard) {
    const std::string token = HGet(keys::FenceKey(Shard(shard), "billing"), "token");
    return token.empty() ? 0 : std::stoll(token);
  }
  // Reads every shard's installed fence and fails the test if one went back since the last read
  // (SHARDING.md B2: it only moves forward).
  void ObserveFences() {
    for (int shard = 0; shard < kShards; ++shard) {
      const int64_t now = InstalledFence(shard);
      int64_t& last = installed_[shard];
      EXPECT_GE(now, last) << "shard " << shard << "'s installed fence went back";
      last = std::max(last, now);
    }
  }
  // Every shard owned, each by the member whose fence is installed on it, and the shards split
  // 4/4 between two members.
  bool MembersHoldEveryShard() {
    std::map<std::string, int> per_member;
    for (int shard = 0; shard < kShards; ++shard) {
      const std::string owner = HGet(Coordinator().owner, std::to_string(shard));
      if (owner.empty()) return false;
      if (HGet(keys::FenceKey(Shard(shard), "billing"), "member") != owner) return false;
      ++per_member[owner];
    }
    return per_member.size() == 2 && per_member.begin()->second == kShards / 2;
  }
  int64_t Pending(int shard) {
    auto reply = cluster_->Run(Shard(shard), {"XPENDING", Shard(shard), "billing"});
    if (reply.IsError() || !reply.view().IsArray() || reply.view().Size() == 0) return -1;
    return reply.view()[0].Integer();
  }
  int64_t PendingOfShards() {
    int64_t pending = 0;
    for (int shard = 0; shard < kShards; ++shard) {
      const int64_t p = Pending(shard);
      if (p < 0) return -1;
      pending += p;
    }
    return pending;
  }
  // INFO commandstats' calls of `command` on node `i` (0 when it was never called).
  int64_t CommandCalls(int i, const std::string& command) {
    const auto info = cluster_->RunOn(i, {"INFO", "commandstats"});
    const std::string text(info.view().Str());
    const std::string needle = "cmdstat_" + command + ":calls=";
    const size_t at = text.find(needle);
    return at == std::string::npos ? 0 : std::stoll(text.substr(at + needle.size()));
  }

  // Two members; returns once both are ready and hold 4 shards each.
  void StartMembers() {
    first_ = StartTopologySidecar(Config("c1"));
    second_ = StartTopologySidecar(Config("c2"), FreePort());
    ASSERT_TRUE(WaitReady(seconds(30))) << first_->Logs();
    ASSERT_TRUE(WaitReady(seconds(30), second_->admin_port())) << second_->Logs();
    ASSERT_TRUE(WaitUntil([&] { return MembersHoldEveryShard(); }, seconds(30)))
        << first_->Logs() << second_->Logs();
    ObserveFences();
  }
  std::string Logs() const { return first_->Logs() + second_->Logs(); }

  // A producer per shard, every 20 ms, confirmed by WAIT on `confirm_port`; returns once every
  // shard is delivered steadily.
  void StartProducers(int confirm_port) {
    const redis::ConnectionOptions options = cluster_->node(0).ClientOptions();
    for (int shard = 0; shard < kShards; ++shard) {
      producers_.push_back(std::make_unique<SteadyProducer>(
          Shard(shard), options, ClusterLocator(Ports(), options, cluster_->SlotOf(Shard(shard))),
          confirm_port, milliseconds(20)));
    }
    ASSERT_TRUE(WaitUntil(
        [&] {
          for (int shard = 0; shard < kShards; ++shard) {
            if (deliveries_.DistinctSeqs(Shard(shard)) < 50) return false;
          }
          return true;
        },
        seconds(30)))
        << Logs();
  }

  // After the fault: the producers write 3 s more on the healed cluster, then stop; every
  // confirmed entry must arrive, every PEL empty, both members hold their shards. Logs the
  // figures; asserts nothing lost, nothing pending, fences forward, the stall bound.
  void Conclude(SteadyTime fault, SteadyTime settled, const std::string& fault_name,
                const std::map<int, int64_t>& fences_before) {
    const auto until = std::chrono::steady_clock::now() + seconds(3);
    while (std::chrono::steady_clock::now() < until) {
      ObserveFences();
      std::this_thread::sleep_for(milliseconds(200));
    }
    for (auto& producer : producers_) producer->Stop();
    const bool all = WaitUntil(
        [&] {
          ObserveFences();
          for (int shard = 0; shard < kShards; ++shard) {
            const auto first = deliveries_.FirstBySeq(Shard(shard));
            for (const auto& e : producers_[shard]->MustDeliver()) {
              if (!first.count(e.seq)) return false;
            }
          }
          return true;
        },
        seconds(40), milliseconds(250));
    const bool drained = WaitUntil([&] { return PendingOfShards() == 0; }, seconds(20));
    const auto held_at = std::chrono::steady_clock::now();
    const bool held = WaitUntil([&] { return MembersHoldEveryShard(); }, seconds(20));
    ObserveFences();

    size_t must = 0, lost = 0, produced = 0;
    milliseconds stall{0};
    int stalled_shard = -1;
    std::string first_lost;
    for (int shard = 0; shard < kShards; ++shard) {
      const FaultFigures f =
          MeasureFault(deliveries_, *producers_[shard], Shard(shard), fault, settled);
      must += f.must_deliver;
      produced += f.produced;
      if (f.lost > 0 && first_lost.empty()) first_lost = Shard(shard) + " " + f.first_lost;
      lost += f.lost;
      if (f.stall > stall) {
        stall = f.stall;
        stalled_shard = shard;
      }
    }
    const milliseconds settle = duration_cast<milliseconds>(settled - fault);
    const std::string json =
        "{\"test\":\"" +
        std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
        "\",\"fault\":\"" + fault_name + "\",\"shards\":" + std::to_string(kShards) +
        ",\"settle_ms\":" + std::to_string(settle.count()) +
        ",\"stall_ms\":" + std::to_string(stall.count()) +
        ",\"stalled_shard\":" + std::to_string(stalled_shard) +
        ",\"i3_bound_ms\":" + std::to_string(kI3Bound.count()) +
        ",\"produced\":" + std::to_string(produced) + ",\"must_deliver\":" + std::to_string(must) +
        ",\"lost\":" + std::to_string(lost) +
        ",\"shards_moved\":" + std::to_string(ShardsMovedSince(fences_before)) + "}";
    std::cout << json << std::endl;
    RecordProperty("figures", json);
    EXPECT_TRUE(all) << lost << " of " << must << " confirmed entries never delivered; first "
                     << first_lost << "\n"
                     << Logs();
    EXPECT_EQ(lost, 0u);
    EXPECT_TRUE(drained) << "pending: " << PendingOfShards() << "\n" << Logs();
    EXPECT_TRUE(held)
        << "the members do not hold every shard "
        << duration_cast<milliseconds>(std::chrono::steady_clock::now() - held_at).count()
        << " ms after the end\n"
        << Logs();
    EXPECT_GE(must, 8u * 100) << "the producers wrote too little to prove anything";
    // No shard went without progress longer than the cluster took to heal plus I3's bound.
    EXPECT_LE(stall, settle + kI3Bound + seconds(3)) << json;
    ExpectInOrderWithShardAndFence();
  }

  // How many shards have another fence installed than in `before` (taken over since).
  int ShardsMovedSince(const std::map<int, int64_t>& before) {
    int moved = 0;
    for (const auto& [shard, token] : before) moved += InstalledFence(shard) != token ? 1 : 0;
    return moved;
  }

  // Per shard, first deliveries come in id order (a redelivery may repeat an older id, never
  // skip ahead of one not yet delivered), each request with the shard of its stream and a fence.
  void ExpectInOrderWithShardAndFence() {
    std::lock_guard lock(seen_mutex_);
    std::map<std::string, int> shard_of;
    for (int shard = 0; shard < kShards; ++shard) shard_of[Shard(shard)] = shard;
    std::map<std::string, std::set<std::string>> delivered;
    std::map<std::string, std::pair<int64_t, int64_t>> last_first;
    size_t out_of_order = 0, bad_headers = 0;
    for (const Seen& s : seen_) {
      const auto known = shard_of.find(s.stream);
      if (known == shard_of.end() || s.shard != known->second || s.fence <= 0) {
        if (bad_headers++ == 0) {
          ADD_FAILURE() << "stream " << s.stream << " id " << s.id << " shard " << s.shard
                        << " fence " << s.fence;
        }
        continue;
      }
      if (!delivered[s.stream].insert(s.id).second) continue;
      const auto order = IdOrder(s.id);
      auto [last, first] = last_first.emplace(s.stream, order);
      if (!first) {
        if (order < last->second && out_of_order++ == 0) {
          ADD_FAILURE() << s.stream << ": " << s.id << " first delivered after a newer entry";
        }
        last->second = std::max(last->second, order);
      }
    }
    EXPECT_EQ(out_of_order, 0u);
    EXPECT_EQ(bad_headers, 0u);
    EXPECT_EQ(delivered.size(), static_cast<size_t>(kShards));
  }

  // The masters the shards live on, and a check that they are several: the shards spread.
  std::map<int, int> ShardsPerMaster() {
    std::map<int, int> per_master;
    for (int shard = 0; shard < kShards; ++shard)
      ++per_master[cluster_->MasterIndexOf(Shard(shard))];
    return per_master;
  }

  struct Seen {
    std::string stream, id;
    int shard = -1;
    int64_t fence = -1;
  };

  static RedisCluster* cluster_;
  std::string stream_;
  std::unique_ptr<SidecarProcess> first_, second_;
  std::vector<std::unique_ptr<SteadyProducer>> producers_;
  std::map<int, int64_t> installed_;
  std::mutex seen_mutex_;
  std::vector<Seen> seen_;
};

RedisCluster* ShardedClusterTest::cluster_ = nullptr;

// Mode auto finds the cluster only at start: a key pattern without a hash tag passes `check`
// there, and would put each shard's stream, fence and dead letters in different slots (every
// fenced script would fail with CROSSSLOT). `run` asks the cluster and refuses it.
TEST_F(ShardedClusterTest, AutoModeRefusesAKeyPatternWhoseShardKeysSplitSlots) {
  stream_ = "split";
  auto sidecar = StartTopologySidecar(Config("c1", "auto", ", key_pattern: \"split-%d\""));
  sidecar->ExpectExit(2);
  ASSERT_EQ(sidecar->Wait(seconds(20)), 2) << sidecar->Logs();
  const std::string logs = sidecar->Logs();
  // The fence key would be split-0:sc:billing:fence, the dead letters split-0:dlq.
  EXPECT_FALSE(LinesWith(logs, {"configuration error", "subscriptions[0].sharding.key_pattern",
                                "subscription sharded, shard 0", "\\\"split-0\\\"",
                                "split-0:sc:billing:fence", "split-0:dlq", "different slots"})
                   .empty())
      << logs;
  EXPECT_EQ(cluster_->Run("split-0", {"EXISTS", "split-0"}).view().Integer(), 0);
}

// A hash tag without the shard index keeps each shard's keys together but puts every shard in
// one slot: `check` refuses it with mode cluster; with mode auto `run` does, once it met a
// cluster.
TEST_F(ShardedClusterTest, AutoModeRefusesAKeyPatternThatPutsEveryShardInOneSlot) {
  stream_ = "oneslot";
  auto sidecar = StartTopologySidecar(Config("c1", "auto", ", key_pattern: \"{oneslot}:%d\""));
  sidecar->ExpectExit(2);
  ASSERT_EQ(sidecar->Wait(seconds(20)), 2) << sidecar->Logs();
  EXPECT_FALSE(
      LinesWith(sidecar->Logs(), {"configuration error", "subscriptions[0].sharding.key_pattern",
                                  "each shard needs a slot of its own"})
          .empty())
      << sidecar->Logs();
}

// The coordinator's master fails over (CLUSTER FAILOVER on its replica) while entries flow on
// every shard. Also: the shards spread over the masters, the slot check ran with CLUSTER
// KEYSLOT, and every takeover's install was followed by WAIT 1 on the shard's master.
TEST_F(ShardedClusterTest, ManualFailoverOfTheCoordinatorsMasterLosesNothing) {
  stream_ = "orders-fo";
  const auto per_master = ShardsPerMaster();
  EXPECT_GE(per_master.size(), 2u) << "the shards' hash tags should spread them over masters";
  StartMembers();
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_FALSE(LinesWith(first_->Logs(), {"shard slots", "CLUSTER KEYSLOT"}).empty())
      << first_->Logs();
  // B5.1: a WAIT for each install at least (a shard moved to the second member was installed
  // twice), on each master that holds shards; before any producer sends WAITs of its own.
  for (const auto& [master, shards] : per_master) {
    EXPECT_GE(CommandCalls(master, "wait"), shards) << "master " << master << "\n" << Logs();
    // What the takeovers paid for it (docs/topologies.md).
    const std::string stats(cluster_->RunOn(master, {"INFO", "commandstats"}).view().Str());
    const size_t at = stats.find("cmdstat_wait:");
    if (at != std::string::npos) {
      std::cout << "master " << master << " " << stats.substr(at, stats.find('\r', at) - at)
                << std::endl;
    }
  }
  const int coordinator = cluster_->MasterIndexOf(Coordinator().meta);
  ASSERT_GE(coordinator, 0);
  if (!per_master.contains(coordinator)) {
    EXPECT_EQ(CommandCalls(coordinator, "wait"), 0) << "no shard there, no install to confirm";
  }

  const int old_port = cluster_->node(coordinator).port();
  StartProducers(old_port);
  ASSERT_FALSE(HasFatalFailure());
  const int replica = cluster_->ReplicaOf(coordinator);
  ASSERT_GE(replica, 0);
  ObserveFences();
  const auto before = installed_;
  const auto fault = std::chrono::steady_clock::now();
  cluster_->ManualFailover(replica);
  ASSERT_FALSE(HasFatalFailure());
  const auto settled = std::chrono::steady_clock::now();
  Conclude(fault, settled, "CLUSTER FAILOVER of the coordinator's master", before);
  EXPECT_EQ(cluster_->MasterIndexOf(Coordinator().meta), replica);
}

// The coordinator's slot migrates to another master while both members heartbeat (SPEC 8). From
// the moment the slot is MIGRATING until it has moved, no node runs the heartbeat script: the
// source answers TRYAGAIN (some coordinator keys never exist, and a multi-key command needs them
// all there) or, once the keys have moved, ASK; the importing node answers TRYAGAIN for the same
// reason; then the old owner answers MOVED. Each heartbeat carries on through these within its
// command timeout (2 s), as the blocking session did, so a migration of under a second loses no
// heartbeat and no lease. A member that took the TRYAGAIN, ASK or MOVED for its answer (the
// window is longer than a heartbeat interval, so each member meets it) counts an error here.
TEST_F(ShardedClusterTest, MigratingTheCoordinatorsSlotLosesNoHeartbeatAndNoLease) {
  stream_ = "orders-mig";
  StartMembers();
  ASSERT_FALSE(HasFatalFailure());
  const int slot = cluster_->SlotOf(Coordinator().meta);
  const int from = cluster_->MasterOfSlot(slot);
  ASSERT_GE(from, 0);
  int to = -1;
  for (int i = 0; i < cluster_->size() && to < 0; ++i) {
    if (i != from && cluster_->Reachable(i) && !cluster_->SlotsOf(i).empty()) to = i;
  }
  ASSERT_GE(to, 0);
  const int ports[] = {first_->admin_port(), second_->admin_port()};
  const auto heartbeats = [&](int port, const std::string& status) {
    return MetricAt(port, "streamcar_coord_heartbeats_total", {"status=\"" + status + "\""});
  };

  cluster_->BeginMigration(slot, from, to);
  cluster_->MoveKeys(slot);  // the coordinator's keys now live on `to`; the slot does not yet
  ASSERT_FALSE(HasFatalFailure());
  // Long enough for each member's next beat (every 400-500 ms) to meet the window.
  std::this_thread::sleep_for(milliseconds(600));
  cluster_->FinishMigration(slot);
  ASSERT_FALSE(HasFatalFailure());
  // Beats at the slot's new master from both members.
  const auto ok_after_move = heartbeats(ports[0], "OK") + heartbeats(ports[1], "OK");
  ASSERT_TRUE(WaitUntil(
      [&] { return heartbeats(ports[0], "OK") + heartbeats(ports[1], "OK") >= ok_after_move + 6; },
      seconds(10)))
      << Logs();
  EXPECT_EQ(cluster_->MasterOfSlot(slot), to);
  for (int port : ports) {
    EXPECT_EQ(heartbeats(port, "error"), 0) << Logs();
    EXPECT_EQ(MetricAt(port, "streamcar_coord_fenced_total", {"reason=\"local_lease\""}), 0)
        << Logs();
  }
  EXPECT_TRUE(MembersHoldEveryShard()) << Logs();
  ObserveFences();
}

// kill -9 of the coordinator's master (node timeout 1 s): every node answers CLUSTERDOWN until
// its replica is promoted; the members' heartbeats fail meanwhile.
TEST_F(ShardedClusterTest, KillMinus9OfTheCoordinatorsMasterLosesNothing) {
  stream_ = "orders-kill";
  StartMembers();
  ASSERT_FALSE(HasFatalFailure());
  const int coordinator = cluster_->MasterIndexOf(Coordinator().meta);
  ASSERT_GE(coordinator, 0);
  StartProducers(cluster_->node(coordinator).port());
  ASSERT_FALSE(HasFatalFailure());
  const auto slots = cluster_->SlotsOf(coordinator);
  ObserveFences();
  const auto before = installed_;
  const auto fault = std::chrono::steady_clock::now();
  cluster_->Kill(coordinator);
  const int successor = cluster_->WaitForPromotion(coordinator, slots);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_GE(successor, 0);
  const auto settled = std::chrono::steady_clock::now();
  Conclude(fault, settled, "kill -9 of the coordinator's master", before);
}

// The coordinator's master and its replica hang (SIGSTOP) for longer than the session: no replica
// can take over, so the whole cluster answers CLUSTERDOWN, the members' leases run out (they stop
// every shard) and, Redis TIME having moved on, the coordinator expires both members. Once the
// nodes resume, the members rejoin and every shard is taken over again with a higher fence: the
// I3 path. Nothing confirmed is lost (no node lost a write), and every shard moves.
TEST_F(ShardedClusterTest, AHangOfTheCoordinatorsNodesLongerThanTheSessionMovesEveryShard) {
  stream_ = "orders-hang";
  StartMembers();
  ASSERT_FALSE(HasFatalFailure());
  const int coordinator = cluster_->MasterIndexOf(Coordinator().meta);
  ASSERT_GE(coordinator, 0);
  const int replica = cluster_->ReplicaOf(coordinator);
  ASSERT_GE(replica, 0);
  StartProducers(/*confirm_port=*/-1);  // no node dies: every acknowledged write counts
  ASSERT_FALSE(HasFatalFailure());
  ObserveFences();
  const auto before = installed_;
  const auto fault = std::chrono::steady_clock::now();
  cluster_->Pause(replica);
  cluster_->Pause(coordinator);
  std::this_thread::sleep_for(seconds(7));  // session_timeout 6 s
  cluster_->Resume(coordinator);
  cluster_->Resume(replica);
  ASSERT_FALSE(HasFatalFailure());
  const auto settled = std::chrono::steady_clock::now();
  Conclude(fault, settled, "SIGSTOP of the coordinator's master and replica for 7 s", before);
  EXPECT_EQ(ShardsMovedSince(before), kShards) << Logs();
}

// B5.1 outside a cluster: no map lists replicas, so ROLE says whether the shard's master has one,
// and WAIT follows each install only then (on a master without replicas WAIT would block its
// whole timeout for nothing).
TEST_F(ShardedClusterTest, OnAStandaloneServerAnInstallIsFollowedByWaitOnlyWithAReplica) {
  stream_ = "solo";
  RedisServer master;
  auto count = [&](const std::string& command) {
    const std::string text(master.Run({"INFO", "commandstats"}).view().Str());
    const std::string needle = "cmdstat_" + command + ":calls=";
    const size_t at = text.find(needle);
    return at == std::string::npos ? int64_t{0} : std::stoll(text.substr(at + needle.size()));
  };
  auto installed = [&] {
    int shards = 0;
    for (int shard = 0; shard < kShards; ++shard) {
      if (!master.Run({"HGET", keys::FenceKey(Shard(shard), "billing"), "member"}).view().IsNil()) {
        ++shards;
      }
    }
    return shards;
  };
  TopologyConfig config = Config("c1");
  config.redis = "  url: " + master.url() + "\n  mode: standalone\n  command_timeout: 2s\n";
  {
    auto alone = StartTopologySidecar(config);
    ASSERT_TRUE(WaitReady(seconds(20))) << alone->Logs();
    ASSERT_TRUE(WaitUntil([&] { return installed() == kShards; }, seconds(20))) << alone->Logs();
    EXPECT_GE(count("role"), kShards) << "each takeover asks whether a replica exists";
    EXPECT_EQ(count("wait"), 0) << alone->Logs();
  }  // leaves the group (SIGTERM)
  RedisServer replica({.replica_of = master.address()});
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string info(master.Run({"INFO", "replication"}).view().Str());
        // ROLE lists a replica only once it is online (its first sync done).
        return info.find("state=online") != std::string::npos;
      },
      seconds(20)));
  config.consumer = "c2";
  auto next = StartTopologySidecar(config);
  ASSERT_TRUE(WaitReady(seconds(20))) << next->Logs();
  // Every shard taken over again, each install followed by WAIT 1.
  EXPECT_TRUE(WaitUntil([&] { return count("wait") >= kShards; }, seconds(20))) << next->Logs();
  EXPECT_TRUE(LinesWith(next->Logs(), {"not confirmed by a replica"}).empty()) << next->Logs();
}

}  // namespace
}  // namespace streamcar::testing
