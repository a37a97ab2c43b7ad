// redis::Topology (SPEC 8) against real deployments: a 6-node cluster (3 masters, 3 replicas), a
// standalone server, a sentinel set (master, replica, 3 sentinels). Mode detection, the master of
// each slot, -MOVED after a real migration, failovers (CLUSTER FAILOVER, kill -9, SENTINEL
// FAILOVER), credentials, and a prompt Stop().

#include "sidecar/redis/topology/topology.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/keys/key_slot.h"
#include "sidecar/redis/topology/reply_kind.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_sentinel.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::testing {
namespace {

using keys::NodeAddress;
using redis::ResolvedMode;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kDataPassword[] = "data-secret";
constexpr char kSentinelPassword[] = "sentinel-secret";

// Counts what the topology reports (the metrics of SPEC 8).
class CountingObserver final : public redis::TopologyObserver {
 public:
  void OnRedirect(redis::ReplyKind kind) override {
    ++(kind == redis::ReplyKind::kMoved ? moved : ask);
  }
  void OnFailover() override { ++failovers; }
  void OnMastersKnown(int n) override {
    masters = n;
    ++maps;
  }
  std::atomic<int> moved{0}, ask{0}, failovers{0}, masters{-1}, maps{0};
};

NodeAddress AddressOf(const RedisServer& server) { return NodeAddress{"127.0.0.1", server.port()}; }

// The address, or an empty one (and a failure) when MasterFor failed.
NodeAddress Address(const StatusOr<NodeAddress>& master) {
  if (master.ok()) return *master;
  ADD_FAILURE() << master.status().message();
  return NodeAddress{};
}

SteadyTime In(seconds timeout) { return SteadyClock::now() + timeout; }

std::string RoleOf(const RedisServer& server) {
  auto connection = redis::Connection::Open(server.ClientOptions());
  if (!connection.ok()) return "";
  auto role = (*connection)->Run(redis::Command("ROLE"));
  return role.ok() ? std::string((*role)[0].Str()) : "";
}

// How long Stop() takes.
milliseconds TimeStop(redis::Topology& topology) {
  const auto started = SteadyClock::now();
  topology.Stop();
  return std::chrono::duration_cast<milliseconds>(SteadyClock::now() - started);
}

class TopologyClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (UnderSanitizer()) GTEST_SKIP() << "six redis-servers and failovers: plain stage only";
    cluster_ = std::make_unique<RedisCluster>();
    ASSERT_FALSE(HasFatalFailure());
    for (int i = 0; i < 3; ++i) {
      keys_.push_back(cluster_->KeyOnMaster(i, "orders-"));
      slots_.push_back(keys::KeySlot(keys_.back()));
    }
  }

  // Seeds: node 0 (the url), then nodes 1 and 2.
  redis::TopologyOptions Options(config::RedisMode mode = config::RedisMode::kAuto) {
    redis::TopologyOptions options;
    options.mode = mode;
    options.data = cluster_->node(0).ClientOptions();
    options.seeds = {AddressOf(cluster_->node(1)), AddressOf(cluster_->node(2))};
    options.used_slots = slots_;
    return options;
  }

  std::unique_ptr<RedisCluster> cluster_;
  std::vector<std::string> keys_;  // keys_[i] is served by master i
  std::vector<int> slots_;
  CountingObserver observer_;
};

TEST_F(TopologyClusterTest, AutoDetectsTheClusterAndNamesTheMasterOfEachSlot) {
  redis::Topology topology(Options(), &observer_);
  EXPECT_FALSE(topology.mode().has_value());
  ASSERT_TRUE(topology.Resolve(In(seconds(20))).ok());
  EXPECT_EQ(topology.mode(), ResolvedMode::kCluster);
  for (int i = 0; i < 3; ++i) {
    auto master = topology.MasterFor(slots_[i]);
    ASSERT_TRUE(master.ok()) << master.status().message();
    EXPECT_EQ(*master, AddressOf(cluster_->node(i))) << keys_[i];
    EXPECT_EQ(topology.KnownMasterFor(slots_[i]), AddressOf(cluster_->node(i)));
  }
  EXPECT_EQ(observer_.masters.load(), 3);
  const auto options = topology.OptionsFor(AddressOf(cluster_->node(2)));
  EXPECT_EQ(options.endpoint.port, cluster_->node(2).port());
  EXPECT_EQ(options.endpoint.db, 0);
  EXPECT_EQ(options.topology, nullptr);
}

TEST_F(TopologyClusterTest, ADatabaseOtherThanZeroIsAConfigurationError) {
  for (auto mode : {config::RedisMode::kAuto, config::RedisMode::kCluster}) {
    auto options = Options(mode);
    options.data.endpoint.db = 3;
    redis::Topology topology(options, &observer_);
    const Status status = topology.Resolve(In(seconds(20)));
    EXPECT_EQ(status.code(), StatusCode::kInvalid) << config::RedisModeName(mode);
    EXPECT_EQ(status.message(), "redis.url: database 3: a cluster has only database 0");
    EXPECT_FALSE(topology.mode().has_value());
  }
}

// A slot moved to master 1: the -MOVED of master 0 is learned at once (before any map read),
// counted, and the map read it asks for agrees; a migration is no failover.
TEST_F(TopologyClusterTest, MovedAfterASlotMigrationIsLearnedAtOnce) {
  redis::Topology topology(Options(), &observer_);
  ASSERT_TRUE(topology.Resolve(In(seconds(20))).ok());
  topology.Start();
  cluster_->Run(keys_[0], {"SET", keys_[0], "v"});
  cluster_->BeginMigration(slots_[0], 0, 1);
  cluster_->MoveKeys(slots_[0]);
  cluster_->FinishMigration(slots_[0]);
  ASSERT_FALSE(HasFatalFailure());

  const redis::Reply reply = cluster_->RunOn(0, {"GET", keys_[0]});
  redis::Redirect redirect;
  ASSERT_EQ(redis::Classify(reply.view(), &redirect), redis::ReplyKind::kMoved);
  const uint64_t before = topology.version();
  const int maps_before = observer_.maps;
  topology.OnMoved(redirect, AddressOf(cluster_->node(0)));
  EXPECT_EQ(topology.KnownMasterFor(slots_[0]), AddressOf(cluster_->node(1)));
  EXPECT_GT(topology.version(), before);
  EXPECT_EQ(observer_.moved.load(), 1);
  // The requested read comes within the coalescing gap (250 ms), not a minute later.
  EXPECT_TRUE(Eventually([&] { return observer_.maps > maps_before; }, seconds(5)));
  EXPECT_EQ(topology.KnownMasterFor(slots_[0]), AddressOf(cluster_->node(1)));
  EXPECT_EQ(topology.KnownMasterFor(slots_[1]), AddressOf(cluster_->node(1)));
  EXPECT_EQ(observer_.failovers.load(), 0);
  topology.OnAsk();
  EXPECT_EQ(observer_.ask.load(), 1);
}

// CLUSTER FAILOVER: the old master, reported failed (its -READONLY), makes MasterFor read the map
// again before it answers (no background thread here: the CLI's way).
TEST_F(TopologyClusterTest, ManualFailoverIsFoundByTheNextMasterFor) {
  redis::Topology topology(Options(config::RedisMode::kCluster), &observer_);
  ASSERT_TRUE(topology.Resolve(In(seconds(20))).ok());
  const int replica = cluster_->ReplicaOf(0);
  ASSERT_GE(replica, 0);
  // Node 0 serves the slot with one live replica (online, or loading while it syncs).
  EXPECT_EQ(topology.KnownReplicasFor(slots_[0], AddressOf(cluster_->node(0))), 1);
  EXPECT_EQ(topology.KnownReplicasFor(slots_[0], AddressOf(cluster_->node(replica))), std::nullopt)
      << "not that slot's master in this map: its count would be another node's";
  cluster_->ManualFailover(replica);
  ASSERT_FALSE(HasFatalFailure());
  const uint64_t before = topology.version();
  EXPECT_EQ(topology.KnownMasterFor(slots_[0]), AddressOf(cluster_->node(0)));
  topology.OnNodeFailed(AddressOf(cluster_->node(0)), "READONLY");
  auto master = topology.MasterFor(slots_[0]);
  ASSERT_TRUE(master.ok()) << master.status().message();
  EXPECT_EQ(*master, AddressOf(cluster_->node(replica)));
  // A connection still on the demoted node gets no count (runtime/settlement.h holds its letters).
  EXPECT_EQ(topology.KnownReplicasFor(slots_[0], AddressOf(cluster_->node(0))), std::nullopt);
  EXPECT_GT(topology.version(), before);
  EXPECT_EQ(observer_.failovers.load(), 1);
  EXPECT_EQ(Address(topology.MasterFor(slots_[1])), AddressOf(cluster_->node(1)));
}

// kill -9 of a master, reported once: the background thread reads the map again and again (not
// once a minute) until the cluster has promoted the replica.
TEST_F(TopologyClusterTest, KillOfAMasterIsFollowedInTheBackground) {
  redis::Topology topology(Options(), &observer_);
  ASSERT_TRUE(topology.Resolve(In(seconds(20))).ok());
  topology.Start();
  const int replica = cluster_->ReplicaOf(0);
  ASSERT_GE(replica, 0);
  const uint64_t before = topology.version();
  cluster_->Kill(0);
  topology.OnNodeFailed(AddressOf(cluster_->node(0)), "connection lost");
  EXPECT_TRUE(Eventually(
      [&] { return topology.KnownMasterFor(slots_[0]) == AddressOf(cluster_->node(replica)); },
      seconds(40)));
  EXPECT_GT(topology.version(), before);
  EXPECT_EQ(observer_.failovers.load(), 1);
  EXPECT_EQ(observer_.masters.load(), 3);
  EXPECT_EQ(topology.KnownMasterFor(slots_[2]), AddressOf(cluster_->node(2)));
  EXPECT_LT(TimeStop(topology), milliseconds(1500));
}

TEST(TopologyStandaloneTest, AutoDetectsAStandaloneServer) {
  RedisServer server;
  redis::TopologyOptions options;
  options.mode = config::RedisMode::kAuto;
  options.data = server.ClientOptions();
  options.data.endpoint.db = 2;  // fine without a cluster
  CountingObserver observer;
  redis::Topology topology(options, &observer);
  ASSERT_TRUE(topology.Resolve(In(seconds(10))).ok());
  EXPECT_EQ(topology.mode(), ResolvedMode::kStandalone);
  EXPECT_EQ(Address(topology.MasterFor(keys::KeySlot("orders"))), AddressOf(server));
  EXPECT_EQ(topology.KnownMasterFor(-1), AddressOf(server));
  EXPECT_EQ(observer.masters.load(), 1);
  EXPECT_EQ(topology.OptionsFor(AddressOf(server)).endpoint.db, 2);
  topology.Start();  // nothing to run
  EXPECT_LT(TimeStop(topology), milliseconds(100));
}

TEST(TopologyStandaloneTest, AutoWithoutTheRightToRunInfoAssumesStandalone) {
  RedisServer server;
  server.Run({"ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "+@all", "-info"});
  redis::TopologyOptions options;
  options.mode = config::RedisMode::kAuto;
  options.data = server.ClientOptions();
  options.data.username = "noinfo";
  options.data.password = "pw";
  redis::Topology topology(options, nullptr);
  const Status status = topology.Resolve(In(seconds(10)));
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(topology.mode(), ResolvedMode::kStandalone);
}

class TopologySentinelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (UnderSanitizer()) GTEST_SKIP() << "five redis-servers and failovers: plain stage only";
    set_ = std::make_unique<SentinelSet>(
        SentinelSetOptions{.data_password = kDataPassword, .sentinel_password = kSentinelPassword});
    ASSERT_FALSE(HasFatalFailure());
  }

  redis::TopologyOptions Options(const std::string& sentinel_password) {
    redis::TopologyOptions options;
    options.mode = config::RedisMode::kSentinel;
    options.data = set_->data(0).ClientOptions();
    options.data.endpoint.port = 1;  // the url's host and port are not used under Sentinel
    options.data.password = kDataPassword;
    options.sentinel.master = "mymaster";
    for (int i = 0; i < set_->sentinel_count(); ++i) {
      options.sentinel.addresses.push_back(set_->sentinel(i).address());
    }
    options.sentinel.password = sentinel_password;
    return options;
  }

  std::unique_ptr<SentinelSet> set_;
  CountingObserver observer_;
};

// SENTINEL FAILOVER: the +switch-master subscription names the new master while the old one still
// says master (sentinel demotes it about 11 s later): waiting for our connection to die would
// write to the old master all that time.
TEST_F(TopologySentinelTest, FollowsSwitchMasterBeforeTheOldMasterIsDemoted) {
  redis::Topology topology(Options(kSentinelPassword), &observer_);
  ASSERT_TRUE(topology.Resolve(In(seconds(20))).ok());
  EXPECT_EQ(topology.mode(), ResolvedMode::kSentinel);
  EXPECT_EQ(Address(topology.MasterFor(-1)), AddressOf(set_->data(0)));
  EXPECT_EQ(observer_.masters.load(), 1);
  topology.Start();
  const uint64_t before = topology.version();

  auto reply = set_->RunOnSentinel(0, {"SENTINEL", "FAILOVER", "mymaster"});
  ASSERT_FALSE(reply.IsError()) << reply.view().Str();
  const auto started = SteadyClock::now();
  ASSERT_TRUE(Eventually([&] { return topology.KnownMasterFor(-1) == AddressOf(set_->data(1)); },
                         seconds(20)));
  const auto found = SteadyClock::now();
  EXPECT_EQ(RoleOf(set_->data(0)), "master") << "found only after the old master was demoted";
  EXPECT_LT(found - started, seconds(8));
  EXPECT_GT(topology.version(), before);
  EXPECT_EQ(observer_.failovers.load(), 1);
  EXPECT_EQ(observer_.masters.load(), 1);
  EXPECT_LT(TimeStop(topology), milliseconds(1500));
}

// The data connection to the master lost: the next MasterFor asks the sentinels again.
TEST_F(TopologySentinelTest, AFailedMasterIsAskedForAgain) {
  redis::Topology topology(Options(kSentinelPassword), &observer_);
  ASSERT_TRUE(topology.Resolve(In(seconds(20))).ok());
  ASSERT_EQ(set_->Failover(), 1);
  EXPECT_EQ(topology.KnownMasterFor(-1), AddressOf(set_->data(0)));  // no thread: not told
  topology.OnNodeFailed(AddressOf(set_->data(0)), "connection lost");
  EXPECT_EQ(Address(topology.MasterFor(-1)), AddressOf(set_->data(1)));
  EXPECT_EQ(observer_.failovers.load(), 1);
}

TEST_F(TopologySentinelTest, AWrongSentinelPasswordIsFatal) {
  redis::Topology topology(Options("not-the-password"), &observer_);
  const Status status = topology.Resolve(In(seconds(20)));
  EXPECT_EQ(status.code(), StatusCode::kFatal);
  EXPECT_NE(status.message().find("redis.sentinel.password"), std::string::npos)
      << status.message();
  EXPECT_FALSE(topology.mode().has_value());
}

}  // namespace
}  // namespace streamcar::testing
