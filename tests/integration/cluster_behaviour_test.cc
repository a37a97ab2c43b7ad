// Redis Cluster as this machine's redis-server behaves: the facts the cluster routing of issue 14
// rests on (notes/issue-14-plan.md section 0), pinned on real 6-node clusters (3 masters, 3
// replicas). Each test starts its own cluster; none uses the product's routing.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "tests/e2e/e2e_fixture.h"
#include "tests/support/redis_cluster.h"

namespace streamcar::testing {
namespace {

using std::chrono::seconds;

// A reply as one line (arrays in brackets), for assertions and logs.
std::string Describe(const redis::ReplyView& reply) {
  if (reply.IsNil()) return "nil";
  if (reply.IsInteger()) return std::to_string(reply.Integer());
  if (reply.IsArray()) {
    std::string text = "[";
    for (size_t i = 0; i < reply.Size(); ++i) text += (i ? " " : "") + Describe(reply[i]);
    return text + "]";
  }
  return std::string(reply.Str());
}

std::string Error(const redis::Reply& reply) {
  return reply.IsError() ? std::string(reply.view().Str())
                         : "(no error: " + Describe(reply.view()) + ")";
}

// The value after `name` in a flat [name value name value ...] reply (RESP2 maps).
redis::ReplyView FieldOf(const redis::ReplyView& map, std::string_view name) {
  for (size_t i = 0; i + 1 < map.Size(); i += 2) {
    if (map[i].Str() == name) return map[i + 1];
  }
  return redis::ReplyView();
}

// Whether a client on `server` is blocked in `command` (CLIENT LIST cmd=<command> flags=b).
bool HasBlockedReader(const RedisServer& server, const std::string& command) {
  const std::string list(server.Run({"CLIENT", "LIST"}).view().Str());
  const std::string needle = " cmd=" + command + " ";
  size_t at = 0;
  while ((at = list.find(needle, at)) != std::string::npos) {
    const auto line_start = list.rfind('\n', at) + 1;
    const auto line = list.substr(line_start, list.find('\n', at) - line_start);
    if (line.find(" flags=b ") != std::string::npos) return true;
    ++at;
  }
  return false;
}

class ClusterBehaviourTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (UnderSanitizer()) GTEST_SKIP() << "six redis-servers and failovers: plain stage only";
    cluster_ = std::make_unique<RedisCluster>();
    ASSERT_FALSE(HasFatalFailure());
  }

  std::string Endpoint(int node) { return cluster_->node(node).address(); }

  // XREADGROUP GROUP g c BLOCK 20000 STREAMS <stream> > (or with `group` false, XREAD BLOCK 20000
  // STREAMS <stream> $) on its own connection to `node`, in another thread; returns once the
  // server reports the client blocked.
  std::future<StatusOr<redis::Reply>> BlockedRead(int node, const std::string& stream,
                                                  std::unique_ptr<redis::Connection>* connection,
                                                  bool group = true) {
    *connection = cluster_->node(node).Connect();
    redis::Connection* raw = connection->get();
    auto read = std::async(std::launch::async, [raw, stream, group] {
      redis::Command command(group ? "XREADGROUP" : "XREAD");
      if (group) command.Arg("GROUP").Arg("g").Arg("c");
      command.Arg("BLOCK").Arg(int64_t{20000}).Arg("STREAMS").Arg(stream).Arg(group ? ">" : "$");
      return raw->RunBlocking(command, Millis(20000));
    });
    const std::string name = group ? "xreadgroup" : "xread";
    EXPECT_TRUE(
        Eventually([&] { return HasBlockedReader(cluster_->node(node), name); }, seconds(10)));
    return read;
  }

  std::unique_ptr<RedisCluster> cluster_;
};

// MOVED and ASK name the slot and the endpoint as `<host>:<port>`; ASKING lets exactly one
// command through on the importing node; MOVED follows SETSLOT NODE.
TEST_F(ClusterBehaviourTest, AskDuringAMigrationIsOneShotAndMovedFollowsSetslot) {
  const std::string stream = cluster_->KeyOnMaster(0, "moved-");
  const std::string missing = "{" + stream + "}:missing";
  const int slot = cluster_->SlotOf(stream);
  ASSERT_EQ(cluster_->SlotOf(missing), slot);
  cluster_->Run(stream, {"XADD", stream, "*", "f", "v"});

  cluster_->BeginMigration(slot, 0, 1);
  // The source serves the keys it still has and sends the others to the target.
  EXPECT_EQ(cluster_->RunOn(0, {"XLEN", stream}).view().Integer(), 1);
  EXPECT_EQ(Error(cluster_->RunOn(0, {"XLEN", missing})),
            "ASK " + std::to_string(slot) + " " + Endpoint(1));
  // The target refuses the slot without ASKING...
  EXPECT_EQ(Error(cluster_->RunOn(1, {"XLEN", missing})),
            "MOVED " + std::to_string(slot) + " " + Endpoint(0));
  // ...and ASKING covers exactly the next command on that connection.
  auto connection = cluster_->node(1).Connect();
  ASSERT_NE(connection, nullptr);
  auto replies =
      connection->RunPipeline({redis::Command("ASKING"), redis::Command("XLEN").Arg(missing),
                               redis::Command("XLEN").Arg(missing)});
  ASSERT_TRUE(replies.ok());
  EXPECT_EQ(Describe((*replies)[0].view()), "OK");
  EXPECT_EQ(Describe((*replies)[1].view()), "0");
  EXPECT_EQ(Error((*replies)[2]), "MOVED " + std::to_string(slot) + " " + Endpoint(0));

  cluster_->MoveKeys(slot);
  EXPECT_EQ(Error(cluster_->RunOn(0, {"XLEN", stream})),
            "ASK " + std::to_string(slot) + " " + Endpoint(1));
  EXPECT_EQ(cluster_->RunOn(1, {"XLEN", stream}, /*asking=*/true).view().Integer(), 1);
  // The harness's own follower gets there through the ASK.
  EXPECT_EQ(cluster_->Run(stream, {"XLEN", stream}).view().Integer(), 1);
  // On the importing side, a multi-key command with one of its keys missing: TRYAGAIN.
  EXPECT_EQ(
      Error(cluster_->RunOn(1, {"EVAL", "return 1", "2", stream, missing}, true)).substr(0, 9),
      "TRYAGAIN ");

  cluster_->FinishMigration(slot);
  EXPECT_EQ(Error(cluster_->RunOn(0, {"XLEN", stream})),
            "MOVED " + std::to_string(slot) + " " + Endpoint(1));
  EXPECT_EQ(cluster_->Run(stream, {"XLEN", stream}).view().Integer(), 1);
}

// A two-key script (the stream and its dead-letter stream) on a MIGRATING slot: served when both
// keys are still on the source, ASK when neither is, TRYAGAIN when only one is (the DLQ that was
// never created) - even for EVALSHA of a script the node does not have: routing comes first.
// Keys of different slots: CROSSSLOT.
TEST_F(ClusterBehaviourTest, TwoKeyScriptOnAMigratingSlotGetsTryAgainWhenOneKeyIsMissing) {
  const std::string stream = cluster_->KeyOnMaster(0, "orders-");
  const std::string dlq = "{" + stream + "}:dlq";
  const std::string other = "{" + stream + "}:other";
  const std::string other_dlq = "{" + stream + "}:other-dlq";
  const int slot = cluster_->SlotOf(stream);
  cluster_->Run(stream, {"XADD", stream, "*", "f", "v"});
  cluster_->Run(dlq, {"XADD", dlq, "*", "f", "v"});
  std::string elsewhere = cluster_->KeyOnMaster(0, "cross-");
  for (int n = 0; cluster_->SlotOf(elsewhere) == slot; ++n) elsewhere += std::to_string(n);
  const std::string script = "return redis.call('XLEN', KEYS[1]) + redis.call('XLEN', KEYS[2])";
  EXPECT_EQ(Error(cluster_->RunOn(0, {"EVAL", script, "2", stream, elsewhere})).substr(0, 10),
            "CROSSSLOT ");

  cluster_->BeginMigration(slot, 0, 1);
  EXPECT_EQ(cluster_->RunOn(0, {"EVAL", script, "2", stream, dlq}).view().Integer(), 2);
  EXPECT_EQ(Error(cluster_->RunOn(0, {"EVAL", script, "2", other, other_dlq})),
            "ASK " + std::to_string(slot) + " " + Endpoint(1));
  EXPECT_EQ(Error(cluster_->RunOn(0, {"EVAL", script, "2", stream, other_dlq})),
            "TRYAGAIN Multiple keys request during rehashing of slot");
  EXPECT_EQ(Error(cluster_->RunOn(0, {"EVALSHA", "0123456789012345678901234567890123456789", "2",
                                      stream, other_dlq})),
            "TRYAGAIN Multiple keys request during rehashing of slot");
  // One key: served where it is, as always.
  EXPECT_EQ(cluster_->RunOn(0, {"XLEN", stream}).view().Integer(), 1);
}

// A slot handed to another node while a reader is blocked on one of its keys there (XREAD on a
// stream not created yet, as a follower waits): the server wakes the reader with MOVED.
TEST_F(ClusterBehaviourTest, ABlockedReadOnASlotThatMovesGetsMoved) {
  const std::string stream = cluster_->KeyOnMaster(0, "follow-");
  const int slot = cluster_->SlotOf(stream);
  std::unique_ptr<redis::Connection> connection;
  auto read = BlockedRead(0, stream, &connection, /*group=*/false);

  // The slot holds no key: it can be handed over without a migration.
  const std::vector<std::string> setslot = {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE",
                                            cluster_->NodeId(1)};
  for (int node : {1, 0, 2}) cluster_->RunOn(node, setslot);
  ASSERT_EQ(read.wait_for(seconds(10)), std::future_status::ready);
  const auto result = read.get();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "MOVED " + std::to_string(slot) + " " + Endpoint(1));
  cluster_->WaitUntilHealthy();
}

// MIGRATE deletes the key on the source: a reader blocked on it there is woken with UNBLOCKED,
// not NOGROUP, and finds the stream with its group on the target.
TEST_F(ClusterBehaviourTest, MigrateUnblocksABlockedReadWithStreamKeyNoLongerExists) {
  const std::string stream = cluster_->KeyOnMaster(0, "migrated-");
  const int slot = cluster_->SlotOf(stream);
  cluster_->Run(stream, {"XGROUP", "CREATE", stream, "g", "$", "MKSTREAM"});
  cluster_->BeginMigration(slot, 0, 1);
  std::unique_ptr<redis::Connection> connection;
  auto read = BlockedRead(0, stream, &connection);

  cluster_->MoveKeys(slot);
  ASSERT_EQ(read.wait_for(seconds(10)), std::future_status::ready);
  const auto result = read.get();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kServerError);
  EXPECT_EQ(result.status().message(), "UNBLOCKED the stream key no longer exists");

  const auto groups = cluster_->RunOn(1, {"XINFO", "GROUPS", stream}, /*asking=*/true);
  ASSERT_FALSE(groups.IsError()) << Error(groups);
  EXPECT_EQ(groups.view().Size(), 1u);
  cluster_->FinishMigration(slot);
}

// CLUSTER FAILOVER: a reader blocked on the old master is woken (UNBLOCKED and the connection
// closed, or MOVED), the old master redirects to the new one, and the script cache did not follow
// the data: NOSCRIPT on the promoted replica for a script loaded on its master.
TEST_F(ClusterBehaviourTest, ManualFailoverUnblocksReadersAndLeavesTheScriptCacheBehind) {
  const std::string stream = cluster_->KeyOnMaster(0, "failover-");
  const int slot = cluster_->SlotOf(stream);
  cluster_->Run(stream, {"XGROUP", "CREATE", stream, "g", "$", "MKSTREAM"});
  const std::string sha(cluster_->RunOn(0, {"SCRIPT", "LOAD", "return 7"}).view().Str());
  const int replica = cluster_->ReplicaOf(0);
  ASSERT_GE(replica, 0);
  EXPECT_EQ(cluster_->RunOn(0, {"WAIT", "1", "5000"}).view().Integer(), 1);
  EXPECT_EQ(Describe(cluster_->RunOn(replica, {"SCRIPT", "EXISTS", sha}).view()), "[0]");

  std::unique_ptr<redis::Connection> connection;
  auto read = BlockedRead(0, stream, &connection);
  cluster_->ManualFailover(replica);
  ASSERT_EQ(read.wait_for(seconds(10)), std::future_status::ready);
  const auto result = read.get();
  ASSERT_FALSE(result.ok());
  const std::string message = result.status().message();
  std::cout << R"({"fact":"blocked read on manual failover","reply":")" << message << "\"}\n";
  if (message.rfind("UNBLOCKED", 0) == 0) {
    EXPECT_EQ(message,
              "UNBLOCKED force unblock from blocking operation, instance state changed (master -> "
              "replica?)");
    // ...and the server closed that connection.
    EXPECT_FALSE(connection->Run(redis::Command("PING")).ok());
  } else {
    EXPECT_EQ(message, "MOVED " + std::to_string(slot) + " " + Endpoint(replica));
  }

  EXPECT_EQ(Error(cluster_->RunOn(0, {"XLEN", stream})),
            "MOVED " + std::to_string(slot) + " " + Endpoint(replica));
  EXPECT_EQ(Error(cluster_->RunOn(replica, {"EVALSHA", sha, "1", stream})).substr(0, 9),
            "NOSCRIPT ");
  EXPECT_EQ(cluster_->RunOn(replica, {"XLEN", stream}).view().Integer(), 0);
  // The harness's follower, its map from before the failover, gets there through the MOVED.
  EXPECT_FALSE(cluster_->Run(stream, {"XADD", stream, "*", "f", "v"}).IsError());
  EXPECT_EQ(cluster_->RunOn(replica, {"XLEN", stream}).view().Integer(), 1);
}

// A master that hangs without closing its connections (SIGSTOP) is failed over after the node
// timeout, and a reader blocked on it hears nothing at all until it resumes: then it learns it
// was replaced and wakes the reader (MOVED or UNBLOCKED).
TEST_F(ClusterBehaviourTest, AHungMasterIsFailedOverAndItsBlockedReaderHearsOnlyWhenItResumes) {
  const std::string stream = cluster_->KeyOnMaster(0, "hung-");
  const int slot = cluster_->SlotOf(stream);
  cluster_->Run(stream, {"XGROUP", "CREATE", stream, "g", "$", "MKSTREAM"});
  const int replica = cluster_->ReplicaOf(0);
  ASSERT_GE(replica, 0);
  const auto slots = cluster_->SlotsOf(0);
  std::unique_ptr<redis::Connection> connection;
  auto read = BlockedRead(0, stream, &connection);

  cluster_->Pause(0);
  EXPECT_EQ(cluster_->WaitForPromotion(0, slots), replica);
  EXPECT_EQ(cluster_->Run(stream, {"XLEN", stream}).view().Integer(), 0);
  EXPECT_EQ(read.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
      << "the reader of a hung master heard something";

  cluster_->Resume(0);
  ASSERT_EQ(read.wait_for(seconds(10)), std::future_status::ready);
  const auto result = read.get();
  ASSERT_FALSE(result.ok());
  const std::string message = result.status().message();
  std::cout << R"({"fact":"blocked read on a hung master after it resumes","reply":")" << message
            << "\"}\n";
  EXPECT_TRUE(message == "MOVED " + std::to_string(slot) + " " + Endpoint(replica) ||
              message.rfind("UNBLOCKED force unblock from blocking operation", 0) == 0)
      << message;
  EXPECT_EQ(Describe(cluster_->RunOn(0, {"ROLE"})[0]), "slave");
}

// kill -9 of a master: with cluster-require-full-coverage (the default) every surviving node,
// whatever slots it serves, answers CLUSTERDOWN until a replica is promoted; the killed node
// comes back as a replica of its successor. CLUSTER SHARDS and SLOTS after the promotion are
// printed for the slot map's unit tests.
TEST_F(ClusterBehaviourTest, MasterKillMakesEveryNodeAnswerClusterDownUntilPromotion) {
  const std::string on_1 = cluster_->KeyOnMaster(1, "alive-");
  const std::string on_2 = cluster_->KeyOnMaster(2, "alive-");
  const std::string on_0 = cluster_->KeyOnMaster(0, "killed-");
  const int replica = cluster_->ReplicaOf(0);
  ASSERT_GE(replica, 0);
  cluster_->Run(on_1, {"XGROUP", "CREATE", on_1, "g", "$", "MKSTREAM"});
  std::unique_ptr<redis::Connection> connection;
  auto read = BlockedRead(1, on_1, &connection);
  // Hold the promotion back so that the window cannot close before it is observed.
  cluster_->RunOn(replica, {"CONFIG", "SET", "cluster-replica-no-failover", "yes"});
  const auto slots = cluster_->SlotsOf(0);
  cluster_->Kill(0);

  std::string seen;
  const bool down = Eventually(
      [&] {
        for (int i = 1; i < cluster_->size(); ++i) {
          for (const auto& key : {on_1, on_2}) {
            const auto reply = cluster_->RunOn(i, {"XLEN", key});
            seen = "node " + std::to_string(i) + " " + key + ": " + Describe(reply.view());
            if (reply.view().Str().rfind("CLUSTERDOWN", 0) != 0) return false;
          }
        }
        return true;
      },
      seconds(15));
  EXPECT_TRUE(down) << "not every node said CLUSTERDOWN; last: " << seen;
  // A reader blocked on a healthy master is woken too.
  ASSERT_EQ(read.wait_for(seconds(10)), std::future_status::ready);
  const auto result = read.get();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "CLUSTERDOWN The cluster is down");

  cluster_->RunOn(replica, {"CONFIG", "SET", "cluster-replica-no-failover", "no"});
  EXPECT_EQ(cluster_->WaitForPromotion(0, slots), replica);
  EXPECT_EQ(cluster_->Run(on_1, {"XLEN", on_1}).view().Integer(), 0);
  EXPECT_EQ(cluster_->Run(on_0, {"XLEN", on_0}).view().Integer(), 0);

  const auto shards = cluster_->RunOn(replica, {"CLUSTER", "SHARDS"});
  const auto slots_reply = cluster_->RunOn(replica, {"CLUSTER", "SLOTS"});
  std::cout << "CLUSTER SHARDS after the kill: " << Describe(shards.view()) << "\n"
            << "CLUSTER SLOTS after the kill: " << Describe(slots_reply.view()) << "\n";
  // SLOTS: the range holding the old master's first slot names the promoted replica first.
  bool found = false;
  for (size_t i = 0; i < slots_reply.view().Size(); ++i) {
    const auto range = slots_reply[i];
    if (range[0].Integer() <= slots.front() && slots.front() <= range[1].Integer()) {
      found = true;
      EXPECT_EQ(range[2][1].Integer(), cluster_->node(replica).port());
    }
  }
  EXPECT_TRUE(found);
  // SHARDS (RESP2: [slots [first last ...] nodes [[field value ...] ...]] per shard): the shard
  // serving that slot has the promoted replica as its online master. Whether the killed master
  // is listed as a shard of its own with no slots (redis/redis#13414) is printed, not asserted.
  bool served = false;
  bool failed_shard_without_slots = false;
  for (size_t i = 0; i < shards.view().Size(); ++i) {
    const auto shard = shards[i];
    const auto ranges = FieldOf(shard, "slots");
    const auto nodes = FieldOf(shard, "nodes");
    for (size_t n = 0; n < nodes.Size(); ++n) {
      if (ranges.Size() == 0 && FieldOf(nodes[n], "health").Str() == "fail") {
        failed_shard_without_slots = true;
      }
    }
    for (size_t r = 0; r + 1 < ranges.Size(); r += 2) {
      if (ranges[r].Integer() > slots.front() || slots.front() > ranges[r + 1].Integer()) continue;
      for (size_t n = 0; n < nodes.Size(); ++n) {
        if (FieldOf(nodes[n], "role").Str() != "master") continue;
        served = true;
        EXPECT_EQ(FieldOf(nodes[n], "port").Integer(), cluster_->node(replica).port());
        EXPECT_EQ(FieldOf(nodes[n], "health").Str(), "online");
      }
    }
  }
  EXPECT_TRUE(served) << Describe(shards.view());
  std::cout << R"({"fact":"CLUSTER SHARDS lists the killed master as a shard without slots",)"
            << R"("seen":)" << (failed_shard_without_slots ? "true" : "false") << "}\n";

  cluster_->Restart(0);
  EXPECT_EQ(Describe(cluster_->RunOn(0, {"ROLE"})[0]), "slave");
}

// A cluster over TLS (clients, bus and replication) with an ACL user on every node: redirections
// name the nodes' TLS ports, and the user reaches every node.
TEST(ClusterTlsTest, RedirectsNameTlsPortsAndTheAclUserReachesEveryNode) {
  if (UnderSanitizer()) GTEST_SKIP() << "six redis-servers: plain stage only";
  RedisCluster cluster(
      {.replicas_per_master = 1, .tls = true, .acl_user = "app", .acl_password = "app-secret"});
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  EXPECT_EQ(cluster.SeedUrl().rfind("rediss://127.0.0.1:", 0), 0u) << cluster.SeedUrl();
  const std::string key = cluster.KeyOnMaster(1, "tls-");
  EXPECT_EQ(Error(cluster.RunOn(0, {"XLEN", key})),
            "MOVED " + std::to_string(cluster.SlotOf(key)) + " " + cluster.node(1).address());
  for (int i = 0; i < cluster.size(); ++i) {
    auto connection = cluster.node(i).Connect("app", "app-secret");
    ASSERT_NE(connection, nullptr) << "node " << i;
    const auto who = connection->Run(redis::Command("ACL").Arg("WHOAMI"));
    ASSERT_TRUE(who.ok()) << who.status().message();
    EXPECT_EQ(who->view().Str(), "app");
  }
  EXPECT_FALSE(cluster.Run(key, {"XADD", key, "*", "f", "v"}).IsError());
  EXPECT_EQ(cluster.RunOn(1, {"WAIT", "1", "5000"}).view().Integer(), 1);
}

// The key slots of plan section 0, as the server computes them (CRC16/XMODEM of the key or its
// hash tag, modulo 16384): a cluster-enabled node answers CLUSTER KEYSLOT before it has slots.
TEST(ClusterKeySlotTest, TheServerHashesKeysAsThePlanSays) {
  RedisServer server({.cluster = true});
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const std::vector<std::pair<std::string, int64_t>> vectors = {
      {"123456789", 0x31C3}, {"foo", 12182},         {"bar", 5061},
      {"orders", 105},       {"{orders}:dlq", 105},  {"orders:dlq", 9954},
      {"a}b", 7866},         {"{a}b}:dlq", 15495},   {"{user1000}.following", 3443},
      {"foo{}{bar}", 8363},  {"foo{{bar}}zap", 4015}};
  for (const auto& [key, slot] : vectors) {
    EXPECT_EQ(server.Run({"CLUSTER", "KEYSLOT", key}).view().Integer(), slot) << key;
  }
  // A tag is the text between the first { and the first } after it, when not empty.
  EXPECT_EQ(server.Run({"CLUSTER", "KEYSLOT", "foo{{bar}}zap"}).view().Integer(),
            server.Run({"CLUSTER", "KEYSLOT", "{bar"}).view().Integer());
  EXPECT_EQ(server.Run({"CLUSTER", "KEYSLOT", "{user1000}.followers"}).view().Integer(), 3443);
}

}  // namespace
}  // namespace streamcar::testing
