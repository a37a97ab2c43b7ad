// Consumer reaping (SPEC 4.6) in Redis Cluster with the real binary: the stream lives on a master
// other than the seed, and the listing and the reap script (whose one key is the stream) run on
// the stream's node.

#include <algorithm>

#include "tests/e2e/e2e_fixture.h"
#include "tests/support/consumer_aging.h"
#include "tests/support/redis_cluster.h"

namespace streamcar::testing {
namespace {

class ReapingClusterTest : public E2eTest {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<RedisCluster>();
    ASSERT_FALSE(HasFatalFailure());
  }

  std::vector<std::string> ConsumerNames(const std::string& stream) {
    std::vector<std::string> names;
    const auto reply = cluster_->Run(stream, {"XINFO", "CONSUMERS", stream, "billing"});
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      names.emplace_back(reply.view()[i][1].Str());  // [name, <name>, pending, ...]
    }
    return names;
  }

  std::unique_ptr<RedisCluster> cluster_;
};

TEST_F(ReapingClusterTest, RemovesAnOldConsumerOnTheStreamsOwnMaster) {
  const int master = 1;  // not the seed (node 0)
  const std::string stream = cluster_->KeyOnMaster(master, "orders");
  ASSERT_EQ(cluster_->MasterIndexOf(stream), master);
  cluster_->Run(stream, {"XGROUP", "CREATE", stream, "billing", "0", "MKSTREAM"});
  cluster_->Run(stream, {"XGROUP", "CREATECONSUMER", stream, "billing", "old-pod"});
  cluster_->Run(stream, {"XGROUP", "CREATECONSUMER", stream, "billing", "recent-pod"});
  AgeConsumers(cluster_->node(master), stream, {"old-pod"}, std::chrono::hours(2));

  SidecarConfig c;
  c.consumer = "b";
  c.stream = stream;
  c.redis_url = cluster_->SeedUrl();
  c.redis_extra = "  mode: cluster\n  nodes: " + cluster_->NodesYaml() + "\n";
  c.consumer_extra = "  reap_idle: 1h\n";
  c.claim_interval = "300ms";
  // The first pass on the first claim beat, not at a random offset up to a minute.
  auto sidecar = StartSidecar(c, {"STREAMCAR_TEST_REAP_OFFSET=0s"});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  ASSERT_TRUE(WaitMetric("streamcar_consumers_reaped_total",
                         {"subscription=\"" + stream + "/billing\""}, 1, seconds(10)))
      << sidecar->Logs();
  auto names = ConsumerNames(stream);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"b", "recent-pod"}));
  EXPECT_NE(sidecar->Logs().find("\"consumer\":\"old-pod\""), std::string::npos) << sidecar->Logs();
  // It still delivers from the stream's master.
  cluster_->Run(stream, {"XADD", stream, "*", "n", "1"});
  EXPECT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
}

}  // namespace
}  // namespace streamcar::testing
