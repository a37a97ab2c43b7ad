// Faults of a real Redis Cluster while the sidecar consumes (SPEC 8: "A failover or a slot
// migration during consumption loses nothing and stalls delivery for no longer than the cluster
// takes to settle"). A producer writes the stream every 5 ms throughout; then the stream's master
// fails over (CLUSTER FAILOVER on its replica), dies (kill -9, node timeout 1 s), or the stream's
// slot migrates to another master while entries flow. Every entry a replica confirmed (WAIT) is
// delivered, nothing stays pending, the topology metrics count the event, and the stall (the
// largest gap between consecutive first deliveries around the fault) stays within the time the
// cluster took to settle (the test's own client's first write on the new owner) plus 3 s of
// margin for a loaded machine. The figures are logged as one JSON line per test.
//
// Plain stage only: six redis-servers, failovers and timing bounds mean nothing under sanitizers.

#include <set>

#include "tests/e2e/topology_e2e.h"
#include "tests/support/redis_cluster.h"

namespace streamcar::testing {
namespace {

class ClusterFaultTest : public TopologyE2eTest {
 protected:
  void SetUp() override {
    if (UnderSanitizer()) GTEST_SKIP() << "six redis-servers, failovers, timing: plain stage only";
    cluster_ = std::make_unique<RedisCluster>();
    ASSERT_FALSE(HasFatalFailure());
    handler_.SetBehaviour([this](const ReceivedRequest& r) {
      deliveries_.Record(r);
      HandlerReply reply;
      if (r.body.find("\"reject\":\"1\"") != std::string::npos) reply.status = 422;
      return reply;
    });
  }
  std::vector<int> Ports() const {
    std::vector<int> ports;
    for (int i = 0; i < cluster_->size(); ++i) ports.push_back(cluster_->node(i).port());
    return ports;
  }

  // One sidecar on `streams` (the first one is the faulted one). Entries of the fault tests are
  // delivered again after a failover (an ack that did not reach the replica): retries are not
  // counted against them (max_attempts 0), and a short min_idle lets either recovery path (own
  // drain or reclaim, SPEC 4.3) finish within the test.
  std::unique_ptr<SidecarProcess> StartOn(const std::vector<std::string>& streams,
                                          const std::string& mode = "cluster") {
    TopologyConfig config;
    config.redis = "  url: " + cluster_->SeedUrl() + "\n  mode: " + mode +
                   "\n  nodes: " + cluster_->NodesYaml() + "\n  command_timeout: 2s\n";
    for (const auto& stream : streams) {
      config.subscriptions.push_back({.name = stream,
                                      .stream = stream,
                                      .max_attempts = 0,
                                      .min_idle = "3s",
                                      .claim_interval = "500ms"});
    }
    return StartTopologySidecar(config);
  }

  // Starts the producer on `stream` (WAIT-confirmed on `confirm_port`) and waits until the
  // sidecar delivers steadily.
  void StartProducer(const std::string& stream, int confirm_port, SidecarProcess& sidecar) {
    redis::ConnectionOptions options = cluster_->node(0).ClientOptions();
    producer_ = std::make_unique<SteadyProducer>(
        stream, options, ClusterLocator(Ports(), options, cluster_->SlotOf(stream)), confirm_port);
    AwaitSteadyDelivery(stream, sidecar);
  }
  FaultFigures Conclude(const std::string& stream, SteadyTime fault, SteadyTime settled,
                        const std::string& fault_name, SidecarProcess& sidecar) {
    return TopologyE2eTest::Conclude(
        stream, fault, settled, fault_name, [&] { return Pending(stream); }, sidecar);
  }

  int64_t Pending(const std::string& stream) {
    auto reply = cluster_->Run(stream, {"XPENDING", stream, "billing"});
    if (reply.IsError() || !reply.view().IsArray() || reply.view().Size() == 0) return -1;
    return reply.view()[0].Integer();
  }
  int64_t ClusterLen(const std::string& key) {
    auto reply = cluster_->Run(key, {"XLEN", key});
    return reply.view().IsInteger() ? reply.view().Integer() : -1;
  }

  std::unique_ptr<RedisCluster> cluster_;
};

TEST_F(ClusterFaultTest, ManualFailoverOfTheStreamsMasterLosesNothing) {
  const std::string stream = cluster_->KeyOnMaster(1, "flow-");
  auto sidecar = StartOn({stream});
  ASSERT_TRUE(WaitReady(seconds(30))) << sidecar->Logs();
  const int old_port = cluster_->node(1).port();
  StartProducer(stream, old_port, *sidecar);
  ASSERT_FALSE(HasFatalFailure());

  const int replica = cluster_->ReplicaOf(1);
  ASSERT_GE(replica, 0);
  const auto fault = std::chrono::steady_clock::now();
  cluster_->ManualFailover(replica);
  ASSERT_FALSE(HasFatalFailure());
  const auto settled = SettleAndStop(fault, [&](int port) { return port != old_port; });

  Conclude(stream, fault, settled, "cluster failover", *sidecar);
  EXPECT_TRUE(WaitMetric("streamcar_redis_failovers_total", {}, 1)) << sidecar->Logs();
  EXPECT_EQ(ClusterLen("{" + stream + "}:dlq"), 0);
  EXPECT_TRUE(WaitReady(seconds(10))) << sidecar->Logs();
}

TEST_F(ClusterFaultTest, KillMinus9OfTheStreamsMasterLosesNothing) {
  // The faulted stream on master 1; another stream on master 2 stalls too (every node answers
  // CLUSTERDOWN until the promotion: cluster-require-full-coverage) and must come back.
  const std::string stream = cluster_->KeyOnMaster(1, "flow-");
  const std::string bystander = cluster_->KeyOnMaster(2, "other-");
  auto sidecar = StartOn({stream, bystander});
  ASSERT_TRUE(WaitReady(seconds(30))) << sidecar->Logs();
  const int old_port = cluster_->node(1).port();
  StartProducer(stream, old_port, *sidecar);
  ASSERT_FALSE(HasFatalFailure());
  ReadyzWatcher readyz(admin_port_);

  const auto slots = cluster_->SlotsOf(1);
  const auto fault = std::chrono::steady_clock::now();
  cluster_->Kill(1);
  const int successor = cluster_->WaitForPromotion(1, slots);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_GE(successor, 0);
  const auto settled = SettleAndStop(fault, [&](int port) { return port != old_port; });

  Conclude(stream, fault, settled, "kill -9 of the master", *sidecar);
  EXPECT_TRUE(WaitMetric("streamcar_redis_failovers_total", {}, 1)) << sidecar->Logs();
  EXPECT_EQ(ClusterLen("{" + stream + "}:dlq"), 0);

  // The stream on a healthy master is consumed again too.
  std::set<std::string> after;
  for (int i = 0; i < 5; ++i) {
    after.insert(std::string(
        cluster_->Run(bystander, {"XADD", bystander, "*", "n", std::to_string(i)}).view().Str()));
  }
  EXPECT_TRUE(WaitUntil(
      [&] {
        for (const auto& id : after) {
          if (deliveries_.For(bystander, id).empty()) return false;
        }
        return Pending(bystander) == 0;
      },
      seconds(15)))
      << sidecar->Logs();

  // SPEC 5: not ready during the outage (every node said CLUSTERDOWN), ready again after.
  EXPECT_TRUE(readyz.SawNotReadySince(fault));
  EXPECT_TRUE(WaitReady(seconds(10))) << sidecar->Logs();
}

TEST_F(ClusterFaultTest, LiveSlotMigrationWhileEntriesFlowLosesNothing) {
  // mode auto: the cluster is found at start, and the default dead-letter stream with it.
  const std::string stream = cluster_->KeyOnMaster(1, "flow-");
  const std::string dlq = "{" + stream + "}:dlq";
  const int slot = cluster_->SlotOf(stream);
  auto sidecar = StartOn({stream}, "auto");
  ASSERT_TRUE(WaitReady(seconds(30))) << sidecar->Logs();
  StartProducer(stream, /*confirm_port=*/-1, *sidecar);  // no node dies: every write counts
  ASSERT_FALSE(HasFatalFailure());
  const int target_port = cluster_->node(2).port();

  cluster_->BeginMigration(slot, 1, 2);
  const auto fault = std::chrono::steady_clock::now();
  cluster_->MoveKeys(slot);  // the stream (with its group) now lives on node 2; the slot does not
  ASSERT_FALSE(HasFatalFailure());
  // The sidecar follows ASK to the importing node while the slot is still node 1's.
  EXPECT_TRUE(
      WaitUntil([&] { return Metric("streamcar_redis_redirects_total", {"kind=\"ask\""}) >= 1; },
                seconds(10)))
      << sidecar->Logs();
  // An entry to dead-letter inside the migration window: its dead letter (stream and dead-letter
  // stream: two keys, one missing on the importing node) waits out TRYAGAIN.
  const std::string rejected =
      std::string(cluster_->Run(stream, {"XADD", stream, "*", "reject", "1"}).view().Str());
  EXPECT_TRUE(WaitUntil([&] { return !deliveries_.For(stream, rejected).empty(); }, seconds(10)))
      << sidecar->Logs();
  cluster_->FinishMigration(slot);
  ASSERT_FALSE(HasFatalFailure());
  const auto settled = SettleAndStop(fault, [&](int port) { return port == target_port; });

  Conclude(stream, fault, settled, "slot migration", *sidecar);
  EXPECT_EQ(cluster_->MasterIndexOf(stream), 2);
  // The dead letter, exactly once, in the stream's slot on its new owner.
  EXPECT_TRUE(WaitUntil([&] { return ClusterLen(dlq) >= 1; }, seconds(15))) << sidecar->Logs();
  auto letters = cluster_->Run(dlq, {"XRANGE", dlq, "-", "+"});
  ASSERT_EQ(letters.view().Size(), 1u);
  const auto fields = letters.view()[0][1];
  std::map<std::string, std::string> letter;
  for (size_t k = 0; k + 1 < fields.Size(); k += 2) {
    letter[std::string(fields[k].Str())] = std::string(fields[k + 1].Str());
  }
  EXPECT_EQ(letter["streamcar.id"], rejected);
  EXPECT_EQ(letter["streamcar.reason"], "rejected");
  EXPECT_EQ(deliveries_.For(stream, rejected).size(), 1u);
  // After the migration the old owner answers MOVED, which the sidecar followed.
  EXPECT_TRUE(WaitMetric("streamcar_redis_redirects_total", {"kind=\"moved\""}, 1))
      << sidecar->Logs();
  EXPECT_EQ(Metric("streamcar_redis_failovers_total"), 0);
  EXPECT_TRUE(WaitReady(seconds(10))) << sidecar->Logs();
}

}  // namespace
}  // namespace streamcar::testing
