// redis::Session routed through a real Redis Cluster (3 masters): MOVED, ASK, TRYAGAIN and a
// pipeline spanning every master. The routes given to the Session here are deliberately wrong
// (every slot on node 0): whatever the Session gets right, it got from the servers' answers.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "sidecar/keys/key_slot.h"
#include "sidecar/redis/script.h"
#include "sidecar/redis/session.h"
#include "sidecar/redis/topology/node_routes.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::testing {
namespace {

using keys::NodeAddress;
using redis::Command;

// Every slot "lives" on one node; redirects and failures are counted, never learned.
class StaleRoutes : public redis::NodeRoutes {
 public:
  explicit StaleRoutes(int port) : node_{"127.0.0.1", port} {}
  bool ByKeySlot() const override { return true; }
  StatusOr<NodeAddress> MasterFor(int) override { return node_; }
  void OnMoved(const redis::Redirect& redirect, const NodeAddress&) override {
    ++moved;
    last_moved_slot = redirect.slot;
  }
  void OnAsk() override { ++asked; }
  void OnNodeFailed(const NodeAddress&, std::string_view) override { ++failed; }
  redis::ConnectionOptions OptionsFor(const NodeAddress& node) const override {
    redis::ConnectionOptions options;
    options.endpoint.host = node.host;
    options.endpoint.port = node.port;
    options.command_timeout = std::chrono::milliseconds(1500);
    return options;
  }

  int moved = 0, asked = 0, failed = 0, last_moved_slot = -1;

 private:
  NodeAddress node_;
};

class RoutedSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ =
        std::make_unique<RedisCluster>(RedisClusterOptions{.masters = 3, .replicas_per_master = 0});
    ASSERT_FALSE(HasFatalFailure());
    routes_ = std::make_shared<StaleRoutes>(cluster_->node(0).port());
    redis::ConnectionOptions options;
    options.command_timeout = std::chrono::milliseconds(1500);
    options.client_name = "routed-test";
    session_ = std::make_unique<redis::Session>(options, "test", &health_, routes_);
    Millis retry_in{0};
    ASSERT_TRUE(session_->ConnectOnce(&retry_in).ok());
  }

  std::unique_ptr<RedisCluster> cluster_;
  std::shared_ptr<StaleRoutes> routes_;
  redis::RedisHealth health_;
  std::unique_ptr<redis::Session> session_;
};

TEST_F(RoutedSessionTest, FollowsMovedToTheKeysMaster) {
  const std::string key = cluster_->KeyOnMaster(2, "orders");
  auto added = session_->Run(Command("XADD").Arg(key).Arg("*").Arg("f").Arg("v"));
  ASSERT_TRUE(added.ok()) << added.status().message();
  EXPECT_EQ(routes_->moved, 1);
  EXPECT_EQ(routes_->last_moved_slot, keys::KeySlot(key));
  EXPECT_EQ(cluster_->RunOn(2, {"XLEN", key}).view().Integer(), 1);
  // An error reply that is the command's own answer stays what it was unrouted.
  auto wrong = session_->Run(Command("GET").Arg(key));
  ASSERT_FALSE(wrong.ok());
  EXPECT_TRUE(wrong.status().IsServerError("WRONGTYPE")) << wrong.status().message();
  // A blocking read follows MOVED too.
  auto read = session_->RunBlocking(
      Command("XREAD").Arg("BLOCK").Arg(int64_t{100}).Arg("STREAMS").Arg(key).Arg("0"),
      Millis(100));
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->view()[0][1].Size(), 1u);
}

// A node's connection that the node closed while it sat unused is opened again before the next
// command (no failure for the caller, no node reported failed).
TEST_F(RoutedSessionTest, ReplacesAConnectionTheNodeClosedWhileItSatUnused) {
  const std::string key = cluster_->KeyOnMaster(0, "orders");
  ASSERT_TRUE(session_->Run(Command("SET").Arg(key).Arg("v")).ok());
  const int64_t id = session_->Run(Command("CLIENT").Arg("ID"))->view().Integer();
  const uint64_t before = session_->generation();
  cluster_->RunOn(0, {"CLIENT", "KILL", "ID", std::to_string(id)});
  // The close may reach this end a moment after CLIENT KILL's answer on a loaded machine.
  Millis retry_in{0};
  EXPECT_TRUE(Eventually(
      [&] { return session_->ConnectOnce(&retry_in).ok() && session_->generation() > before; },
      Millis(2000)));
  auto value = session_->Run(Command("GET").Arg(key));
  ASSERT_TRUE(value.ok()) << value.status().message();
  EXPECT_EQ(value->view().Str(), "v");
  EXPECT_EQ(routes_->failed, 0);
  EXPECT_EQ(session_->lost_connections(), 0u);
}

TEST_F(RoutedSessionTest, FollowsMovedAfterASlotMigration) {
  // The key starts on node 0 (where the stale routes point) and its slot moves to node 1.
  const std::string key = cluster_->KeyOnMaster(0, "moving");
  ASSERT_TRUE(session_->Run(Command("XADD").Arg(key).Arg("*").Arg("n").Arg("1")).ok());
  EXPECT_EQ(routes_->moved, 0);
  const int slot = cluster_->SlotOf(key);
  cluster_->BeginMigration(slot, 0, 1);
  cluster_->MoveKeys(slot);
  cluster_->FinishMigration(slot);
  auto length = session_->Run(Command("XLEN").Arg(key));
  ASSERT_TRUE(length.ok()) << length.status().message();
  EXPECT_EQ(length->view().Integer(), 1);
  EXPECT_EQ(routes_->moved, 1);
  EXPECT_EQ(routes_->last_moved_slot, slot);
}

TEST_F(RoutedSessionTest, FollowsAskWhileTheSlotIsMigrating) {
  const std::string key = cluster_->KeyOnMaster(0, "asked");
  ASSERT_TRUE(session_->Run(Command("XADD").Arg(key).Arg("*").Arg("n").Arg("1")).ok());
  const int slot = cluster_->SlotOf(key);
  cluster_->BeginMigration(slot, 0, 1);
  cluster_->MoveKeys(slot);  // the key is on node 1 now; the slot still belongs to node 0
  auto added = session_->Run(Command("XADD").Arg(key).Arg("*").Arg("n").Arg("2"));
  ASSERT_TRUE(added.ok()) << added.status().message();
  auto length = session_->Run(Command("XLEN").Arg(key));
  ASSERT_TRUE(length.ok()) << length.status().message();
  EXPECT_EQ(length->view().Integer(), 2);
  EXPECT_EQ(routes_->asked, 2);
  EXPECT_EQ(routes_->moved, 0);  // ASK teaches nothing
  EXPECT_EQ(cluster_->RunOn(1, {"XLEN", key}, /*asking=*/true).view().Integer(), 2);
  // The same in a pipeline.
  auto replies = session_->RunPipeline({Command("XLEN").Arg(key), Command("XLEN").Arg(key)});
  ASSERT_TRUE(replies.ok()) << replies.status().message();
  EXPECT_EQ((*replies)[0].view().Integer(), 2);
  EXPECT_EQ((*replies)[1].view().Integer(), 2);
  cluster_->FinishMigration(slot);
}

TEST_F(RoutedSessionTest, RetriesTryAgainUntilTheMigrationEnds) {
  // A two-key command on a migrating slot where one key has moved and the other has not:
  // TRYAGAIN from the source until the migration ends, then MOVED to the new owner.
  const std::string tag = "{" + cluster_->KeyOnMaster(0, "t") + "}";
  const std::string a = tag + "a", b = tag + "b";
  ASSERT_TRUE(session_->Run(Command("SET").Arg(a).Arg("1")).ok());
  const int slot = cluster_->SlotOf(a);
  cluster_->BeginMigration(slot, 0, 1);
  // b is new: the source ASKs it over to the target, while a stays on the source.
  ASSERT_TRUE(session_->Run(Command("SET").Arg(b).Arg("2")).ok());
  EXPECT_EQ(routes_->asked, 1);
  // A two-key command now gets TRYAGAIN from the source (one key there, one missing).
  const Command both = std::move(Command("EVAL")
                                     .Arg("return redis.call('EXISTS', KEYS[1], KEYS[2])")
                                     .Arg(int64_t{2})
                                     .Arg(a)
                                     .Arg(b));
  const auto start = std::chrono::steady_clock::now();
  auto stuck = session_->Run(both);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(stuck.ok());
  EXPECT_TRUE(stuck.status().IsServerError("TRYAGAIN")) << stuck.status().message();
  // It was retried with backoff until about the command timeout, not answered at once.
  EXPECT_GE(waited, std::chrono::milliseconds(700));
  cluster_->MoveKeys(slot);
  cluster_->FinishMigration(slot);
  auto done = session_->Run(both);
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_EQ(done->view().Integer(), 2);
}

TEST_F(RoutedSessionTest, APipelineSpanningThreeMastersKeepsItsOrder) {
  const std::string k0 = cluster_->KeyOnMaster(0, "p"), k1 = cluster_->KeyOnMaster(1, "p"),
                    k2 = cluster_->KeyOnMaster(2, "p");
  const redis::Script script("return redis.call('XLEN', KEYS[1])");
  std::vector<Command> commands;
  commands.push_back(std::move(Command("XADD").Arg(k1).Arg("*").Arg("f").Arg("1")));
  commands.push_back(std::move(Command("XADD").Arg(k2).Arg("*").Arg("f").Arg("1")));
  commands.push_back(std::move(Command("XADD").Arg(k2).Arg("*").Arg("f").Arg("2")));
  commands.push_back(std::move(Command("XADD").Arg(k0).Arg("*").Arg("f").Arg("1")));
  commands.push_back(std::move(Command("XLEN").Arg(k2)));
  commands.push_back(script.Load());
  commands.push_back(script.Call({k1}));
  commands.push_back(std::move(Command("PING")));
  commands.push_back(std::move(Command("XLEN").Arg(k0)));
  auto replies = session_->RunPipeline(commands);
  ASSERT_TRUE(replies.ok()) << replies.status().message();
  ASSERT_EQ(replies->size(), commands.size());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE((*replies)[i].view().IsString()) << i;
  EXPECT_EQ((*replies)[4].view().Integer(), 2);
  EXPECT_EQ((*replies)[5].view().Str(), script.sha());
  EXPECT_EQ((*replies)[6].view().Integer(), 1);  // loaded on k1's master, not only node 0
  EXPECT_EQ((*replies)[7].view().Str(), "PONG");
  EXPECT_EQ((*replies)[8].view().Integer(), 1);
  EXPECT_EQ(cluster_->RunOn(1, {"XLEN", k1}).view().Integer(), 1);
  EXPECT_EQ(cluster_->RunOn(2, {"XLEN", k2}).view().Integer(), 2);
  // The second time the script is known on k2's master only after a NOSCRIPT there.
  auto again = session_->Run(script.Call({k2}));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->view().Integer(), 2);
}

}  // namespace
}  // namespace streamcar::testing
