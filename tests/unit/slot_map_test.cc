// The slot map, read from CLUSTER SHARDS and CLUSTER SLOTS replies that redis-server 7.0.15 sent
// (tests/unit/data/cluster/README.md says how each was recorded).

#include "sidecar/redis/topology/slot_map.h"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/resp_reply.h"

namespace streamcar::redis {
namespace {

using testing::Arr;
using testing::Bulk;
using testing::Int;
using testing::Nil;
using testing::ReplyOf;

constexpr const char* kOldMaster0 = "9a658cf426ef8c12700bedfec8731d227c2b8e65";  // 56947
constexpr const char* kMaster1 = "cc955183c6d3a192c793a9547c6ec73149b2bc77";     // 48079
constexpr const char* kMaster2 = "09da39b231995a5d41bc655f81c2ff9807fba0ae";     // 44941
constexpr const char* kReplica2 = "5782a7f3070a389ad89deba78a9825b8b68c5766";    // 58175
constexpr const char* kReplica0 = "eeb99cd4c92789caf09eac524318cf13c6911e96";    // 60235
constexpr const char* kReplica1 = "de5ef835979cd7210a06ca3b2a89cbe19aac1777";    // 56203

const keys::NodeAddress kAsked{"127.0.0.1", 48079};

Reply Recorded(const std::string& name) {
  std::ifstream in(std::string(STREAMCAR_SOURCE_DIR) + "/tests/unit/data/cluster/" + name +
                   ".resp");
  std::stringstream bytes;
  bytes << in.rdbuf();
  EXPECT_FALSE(bytes.str().empty()) << name;
  Reply reply = ReplyOf(bytes.str());
  EXPECT_TRUE(reply.view().IsArray()) << name;
  return reply;
}

SlotMap Shards(const std::string& name, const keys::NodeAddress& asked = kAsked) {
  Reply reply = Recorded(name);
  auto map = SlotMap::FromShards(reply.view(), asked, /*tls=*/false);
  EXPECT_TRUE(map.ok()) << name << ": " << map.status().ToString();
  return map.ok() ? std::move(*map) : SlotMap();
}

SlotMap Slots(const std::string& name, const keys::NodeAddress& asked = kAsked) {
  Reply reply = Recorded(name);
  auto map = SlotMap::FromSlots(reply.view(), asked);
  EXPECT_TRUE(map.ok()) << name << ": " << map.status().ToString();
  return map.ok() ? std::move(*map) : SlotMap();
}

keys::NodeAddress Local(int port) { return {"127.0.0.1", port}; }

// Slots of "foo" (12182), "orders:dlq" (9954) and "orders" (105): one on each original master.
const std::vector<int> kUsed = {12182, 9954, 105};

TEST(SlotMapTest, ShardsAndSlotsOfAHealthyClusterAgree) {
  for (const SlotMap& map : {Shards("shards_ok"), Slots("slots_ok")}) {
    ASSERT_NE(map.ShardOf(0), nullptr);
    EXPECT_EQ(map.ShardOf(0)->master.id, kOldMaster0);
    EXPECT_EQ(map.ShardOf(0)->master.address, Local(56947));
    EXPECT_EQ(map.ShardOf(5460)->master.id, kOldMaster0);
    EXPECT_EQ(map.ShardOf(5461)->master.id, kMaster1);
    EXPECT_EQ(map.ShardOf(10922)->master.address, Local(48079));
    EXPECT_EQ(map.ShardOf(10923)->master.id, kMaster2);
    EXPECT_EQ(map.ShardOf(16383)->master.address, Local(44941));
    EXPECT_EQ(map.ShardOf(16384), nullptr);
    EXPECT_EQ(map.ShardOf(-1), nullptr);
    ASSERT_EQ(map.ShardOf(12182)->replicas.size(), 1u);
    EXPECT_EQ(map.ShardOf(12182)->replicas[0].id, kReplica2);
    EXPECT_EQ(map.ShardOf(12182)->replicas[0].address, Local(58175));
    EXPECT_EQ(map.ShardOf(105)->replicas[0].id, kReplica0);
    EXPECT_EQ(map.ShardOf(9954)->replicas[0].id, kReplica1);
    EXPECT_TRUE(map.Serves(kUsed));
    EXPECT_EQ(map.Masters().size(), 3u);
    // Masters first, then replicas.
    const auto candidates = map.RefreshCandidates();
    ASSERT_EQ(candidates.size(), 6u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(candidates[i] == Local(56947) || candidates[i] == Local(48079) ||
                  candidates[i] == Local(44941))
          << candidates[i].Describe();
    }
    for (int i = 3; i < 6; ++i) {
      EXPECT_TRUE(candidates[i] == Local(58175) || candidates[i] == Local(60235) ||
                  candidates[i] == Local(56203))
          << candidates[i].Describe();
    }
  }
}

TEST(SlotMapTest, AfterAFailoverThePromotedReplicaServesAndTheDeadMasterServesNothing) {
  // 7.0.15 lists the killed master as a shard of its own, with empty slots and health "fail".
  const SlotMap before = Shards("shards_ok");
  for (const SlotMap& map : {Shards("shards_after_failover"), Slots("slots_after_failover")}) {
    ASSERT_NE(map.ShardOf(105), nullptr);
    EXPECT_EQ(map.ShardOf(105)->master.id, kReplica0);
    EXPECT_EQ(map.ShardOf(105)->master.address, Local(60235));
    EXPECT_TRUE(map.Serves(kUsed));
    EXPECT_EQ(map.Masters().size(), 3u);
    EXPECT_TRUE(map.IsFailover(105, before));
    EXPECT_FALSE(map.IsFailover(12182, before));  // unchanged
    const auto masters = map.Masters();
    EXPECT_EQ(std::count(masters.begin(), masters.end(), Local(56947)), 0);
  }
  const SlotMap shards = Shards("shards_after_failover");
  ASSERT_EQ(shards.shards().size(), 4u);
  bool found_dead = false;
  for (const Shard& shard : shards.shards()) {
    if (shard.master.id != kOldMaster0) continue;
    found_dead = true;
    EXPECT_TRUE(shard.slots.empty());
    EXPECT_FALSE(shard.master.healthy);
  }
  EXPECT_TRUE(found_dead);
  // The dead node is still a candidate, last.
  const auto candidates = shards.RefreshCandidates();
  ASSERT_FALSE(candidates.empty());
  EXPECT_EQ(candidates.back(), Local(56947));
}

TEST(SlotMapTest, AFailedMasterFailsServesInShardsButNotInSlots) {
  // 09da39b2 and its replica stopped: SHARDS says health "fail"; SLOTS still lists the master
  // (and drops the failed replica). A refresh must not adopt the SHARDS map for slot 12182.
  const SlotMap shards = Shards("shards_master_down");
  ASSERT_NE(shards.ShardOf(12182), nullptr);
  EXPECT_EQ(shards.ShardOf(12182)->master.id, kMaster2);
  EXPECT_FALSE(shards.ShardOf(12182)->master.healthy);
  EXPECT_FALSE(shards.Serves(kUsed));
  EXPECT_TRUE(shards.Serves(std::vector<int>{105, 9954}));
  const SlotMap slots = Slots("slots_master_down");
  EXPECT_EQ(slots.ShardOf(12182)->master.id, kMaster2);
  EXPECT_TRUE(slots.ShardOf(12182)->replicas.empty());
  EXPECT_TRUE(slots.Serves(kUsed));
  // Healthy masters first, failed nodes after every healthy one.
  const auto candidates = shards.RefreshCandidates();
  ASSERT_GE(candidates.size(), 4u);
  EXPECT_EQ(candidates[candidates.size() - 1], Local(58175));
  for (size_t i = 0; i + 3 < candidates.size(); ++i) {
    EXPECT_NE(candidates[i], Local(44941)) << i;
    EXPECT_NE(candidates[i], Local(56947)) << i;
  }
}

TEST(SlotMapTest, ARejoinedMasterIsAReplicaOfItsSuccessor) {
  const SlotMap after = Shards("shards_after_failover");
  for (const SlotMap& map : {Shards("shards_rejoined"), Slots("slots_rejoined")}) {
    ASSERT_NE(map.ShardOf(0), nullptr);
    EXPECT_EQ(map.ShardOf(0)->master.id, kReplica0);
    ASSERT_EQ(map.ShardOf(0)->replicas.size(), 1u);
    EXPECT_EQ(map.ShardOf(0)->replicas[0].id, kOldMaster0);
    EXPECT_FALSE(map.IsFailover(0, after));  // same master as in the previous map
  }
  EXPECT_EQ(Shards("shards_rejoined").shards().size(), 3u);
}

TEST(SlotMapTest, EndpointsFollowThePreferredType) {
  // Hostnames announced: the endpoint is the hostname.
  for (const SlotMap& map : {Shards("shards_hostname"), Slots("slots_hostname")}) {
    EXPECT_EQ(map.ShardOf(12182)->master.address,
              (keys::NodeAddress{"node-44941.redis.test", 44941}));
    EXPECT_EQ(map.ShardOf(105)->master.address,
              (keys::NodeAddress{"node-60235.redis.test", 60235}));
  }
  // Hostnames preferred but none set: "?"; the node's ip is used, not the host we asked.
  const keys::NodeAddress balancer{"redis.lb.example", 48079};
  for (const SlotMap& map :
       {Shards("shards_hostname_unset", balancer), Slots("slots_hostname_unset", balancer)}) {
    EXPECT_EQ(map.ShardOf(12182)->master.address, Local(44941));
    EXPECT_TRUE(map.ShardOf(12182)->master.healthy);
    EXPECT_TRUE(map.Serves(kUsed));
  }
  // unknown-endpoint: SHARDS says "", SLOTS nil: the host we asked, with each node's port.
  for (const SlotMap& map :
       {Shards("shards_unknown_endpoint", balancer), Slots("slots_unknown_endpoint", balancer)}) {
    EXPECT_EQ(map.ShardOf(12182)->master.address, (keys::NodeAddress{"redis.lb.example", 44941}));
    EXPECT_EQ(map.ShardOf(5061)->replicas[0].address,
              (keys::NodeAddress{"redis.lb.example", 56947}));
  }
  // An announced IPv6 address.
  for (const SlotMap& map : {Shards("shards_ipv6"), Slots("slots_ipv6")}) {
    EXPECT_EQ(map.ShardOf(12182)->master.address, (keys::NodeAddress{"::1", 44941}));
  }
}

TEST(SlotMapTest, AQuestionMarkWithoutAnIpIsNotServed) {
  // CLUSTER SLOTS as 7.0 writes it for hostname preferred, none set, and (made up) no ip metadata.
  const std::string resp =
      Arr({Arr({Int(0), Int(16383), Arr({Bulk("?"), Int(7000), Bulk("aa"), Arr({})})})});
  Reply reply = ReplyOf(resp);
  auto map = SlotMap::FromSlots(reply.view(), kAsked);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_FALSE(map->ShardOf(0)->master.healthy);
  EXPECT_FALSE(map->Serves(std::vector<int>{0}));
  EXPECT_TRUE(map->RefreshCandidates().empty());
}

// A CLUSTER SHARDS node as a flat map.
std::string ShardNode(const std::string& id, int port, const std::string& role,
                      const std::string& health, int tls_port = 0) {
  std::vector<std::string> fields = {Bulk("id"), Bulk(id), Bulk("port"), Int(port)};
  if (tls_port != 0) {
    fields.push_back(Bulk("tls-port"));
    fields.push_back(Int(tls_port));
  }
  for (const auto& item :
       {Bulk("ip"), Bulk("10.0.0.1"), Bulk("endpoint"), Bulk("10.0.0.1"), Bulk("role"), Bulk(role),
        Bulk("replication-offset"), Int(1), Bulk("health"), Bulk(health)}) {
    fields.push_back(item);
  }
  return Arr(fields);
}

TEST(SlotMapTest, TlsUsesTheTlsPortAndSaysWhenThereIsNone) {
  // The shape 7.0 writes with tls-cluster yes (made up: no TLS cluster was recorded).
  const std::string resp = Arr({Arr({Bulk("slots"), Arr({Int(0), Int(16383)}), Bulk("nodes"),
                                     Arr({ShardNode("m", 6379, "master", "online", 6380)})})});
  Reply reply = ReplyOf(resp);
  auto tls = SlotMap::FromShards(reply.view(), kAsked, /*tls=*/true);
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  EXPECT_EQ(tls->ShardOf(0)->master.address, (keys::NodeAddress{"10.0.0.1", 6380}));
  auto plain = SlotMap::FromShards(reply.view(), kAsked, /*tls=*/false);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->ShardOf(0)->master.address, (keys::NodeAddress{"10.0.0.1", 6379}));
  // Recorded without tls-cluster: no tls-port to connect a TLS client to.
  Reply recorded = Recorded("shards_ok");
  auto missing = SlotMap::FromShards(recorded.view(), kAsked, /*tls=*/true);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tls-cluster yes"), std::string::npos)
      << missing.status().message();
}

TEST(SlotMapTest, SlotsMayBeStringsAndHealthMayBeAbsent) {
  const std::string resp =
      Arr({Arr({Bulk("slots"), Arr({Bulk("0"), Bulk("16383")}), Bulk("nodes"),
                Arr({Arr({Bulk("id"), Bulk("m"), Bulk("port"), Int(7000), Bulk("endpoint"),
                          Bulk("h"), Bulk("role"), Bulk("master")})})})});
  Reply reply = ReplyOf(resp);
  auto map = SlotMap::FromShards(reply.view(), kAsked, false);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_NE(map->ShardOf(16383), nullptr);
  EXPECT_EQ(map->ShardOf(16383)->master.address, (keys::NodeAddress{"h", 7000}));
  EXPECT_TRUE(map->Serves(kUsed));
  Reply bad =
      ReplyOf(Arr({Arr({Bulk("slots"), Arr({Bulk("0"), Bulk("1x")}), Bulk("nodes"), Arr({})})}));
  EXPECT_FALSE(SlotMap::FromShards(bad.view(), kAsked, false).ok());
}

TEST(SlotMapTest, AShardWithEmptySlotsServesNothingSoSlotsIsAskedNext) {
  // redis/redis#13414 (7.2 with shard ids): the failed old master first, then the promoted one,
  // and no slots. The map must not serve 0..16383 from it.
  const std::string resp = Arr({Arr({Bulk("slots"), Arr({}), Bulk("nodes"),
                                     Arr({ShardNode("old", 7000, "master", "fail"),
                                          ShardNode("new", 7001, "master", "online")})})});
  Reply reply = ReplyOf(resp);
  auto map = SlotMap::FromShards(reply.view(), kAsked, false);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->ShardOf(0), nullptr);
  EXPECT_FALSE(map->Serves(std::vector<int>{0}));
  EXPECT_TRUE(map->Serves(std::vector<int>{}));
  ASSERT_EQ(map->shards().size(), 1u);
  EXPECT_EQ(map->shards()[0].master.id, "new");  // the healthy master leads the shard
  ASSERT_EQ(map->RefreshCandidates().size(), 2u);
}

TEST(SlotMapTest, RefusesMalformedReplies) {
  struct Case {
    std::string resp;
    bool shards;
    const char* says;
  };
  const std::string node = ShardNode("m", 6379, "master", "online");
  for (const Case& c : {
           Case{Bulk("x"), true, "not a list of shards"},
           Case{Arr({Bulk("x")}), true, "not a map"},
           Case{Arr({Arr({Bulk("slots"), Arr({Int(0)}), Bulk("nodes"), Arr({node})})}), true,
                "pairs"},
           Case{Arr({Arr({Bulk("slots"), Arr({Int(5), Int(4)}), Bulk("nodes"), Arr({node})})}),
                true, "5-4"},
           Case{Arr({Arr({Bulk("slots"), Arr({Int(0), Int(16384)}), Bulk("nodes"), Arr({node})})}),
                true, "0-16384"},
           Case{Arr({Arr({Bulk("slots"), Arr({Int(0), Int(1)})})}), true, "no \"nodes\""},
           Case{Arr({Arr({Bulk("slots"), Arr({Int(0), Int(1)}), Bulk("nodes"),
                          Arr({Arr({Bulk("id"), Bulk("m"), Bulk("port"), Int(0)})})})}),
                true, "no port"},
           Case{Arr({Arr({Bulk("slots"), Arr({Int(0), Int(9)}), Bulk("nodes"), Arr({node})}),
                     Arr({Bulk("slots"), Arr({Int(9), Int(9)}), Bulk("nodes"),
                          Arr({ShardNode("n", 6380, "master", "online")})})}),
                true, "slot 9 is claimed by two shards"},
           Case{Nil(), false, "not a list"},
           Case{Arr({Arr({Int(0), Int(1)})}), false, "not [first, last"},
           Case{Arr({Arr({Int(0), Int(16384), Arr({Bulk("h"), Int(1), Bulk("a")})})}), false,
                "0-16384"},
           Case{Arr({Arr({Int(0), Int(1), Arr({Bulk("h"), Int(70000), Bulk("a")})})}), false,
                "not [endpoint, port"},
           Case{Arr({Arr({Int(0), Int(1), Arr({Bulk("h"), Int(1), Bulk("a")})}),
                     Arr({Int(1), Int(2), Arr({Bulk("h"), Int(2), Bulk("b")})})}),
                false, "slot 1 is claimed by two shards"},
       }) {
    Reply reply = ReplyOf(c.resp);
    const Status status = c.shards ? SlotMap::FromShards(reply.view(), kAsked, false).status()
                                   : SlotMap::FromSlots(reply.view(), kAsked).status();
    EXPECT_EQ(status.code(), StatusCode::kProtocol) << c.says;
    EXPECT_NE(status.message().find(c.says), std::string::npos) << status.message();
  }
}

TEST(SlotMapTest, SlotsMergesTheRangesOfOneMaster) {
  const std::string resp = Arr({
      Arr({Int(0), Int(99), Arr({Bulk("a"), Int(1), Bulk("ida")})}),
      Arr({Int(100), Int(199), Arr({Bulk("b"), Int(2), Bulk("idb")})}),
      Arr({Int(200), Int(16383), Arr({Bulk("a"), Int(1), Bulk("ida")})}),
  });
  Reply reply = ReplyOf(resp);
  auto map = SlotMap::FromSlots(reply.view(), kAsked);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->shards().size(), 2u);
  EXPECT_EQ(map->ShardOf(0), map->ShardOf(16383));
  EXPECT_NE(map->ShardOf(0), map->ShardOf(100));
  EXPECT_EQ(map->Masters(), (std::vector<keys::NodeAddress>{{"a", 1}, {"b", 2}}));
}

TEST(SlotMapTest, MovedTakesEffectAtOnceAndAMigrationIsNoFailover) {
  const SlotMap before = Shards("shards_ok");
  SlotMap map = before;
  // "foo" (12182) migrated to the master of 5461-10922: a migration, not a failover.
  map.LearnMoved(12182, Local(48079));
  EXPECT_EQ(map.ShardOf(12182)->master.id, kMaster1);
  EXPECT_EQ(map.ShardOf(12183)->master.id, kMaster2);  // only that slot
  EXPECT_FALSE(map.IsFailover(12182, before));
  EXPECT_EQ(map.shards().size(), 3u);
  // A node the map does not know: a shard of its own, without id.
  map.LearnMoved(0, keys::NodeAddress{"10.9.9.9", 7000});
  EXPECT_EQ(map.ShardOf(0)->master.address, (keys::NodeAddress{"10.9.9.9", 7000}));
  EXPECT_EQ(map.ShardOf(1)->master.id, kOldMaster0);
  EXPECT_EQ(map.Masters().size(), 4u);
  EXPECT_FALSE(map.IsFailover(0, before));
  // Moved to the old master's replica: by address, a failover.
  map.LearnMoved(105, Local(60235));
  EXPECT_TRUE(map.IsFailover(105, before));
  EXPECT_TRUE(map.Serves(kUsed));
  // Out of range: ignored.
  map.LearnMoved(16384, Local(1));
  map.LearnMoved(-1, Local(1));
  EXPECT_EQ(map.Masters().size(), 5u);
}

// What a two-step dead letter's WAIT goes by (runtime/settlement.h): the replicas of a slot's
// master the cluster has not marked failed, unknown where the map cannot say.
TEST(SlotMapTest, LiveReplicasAreCountedPerSlotAndUnknownForAMovedToStranger) {
  for (const SlotMap& map : {Shards("shards_ok"), Slots("slots_ok")}) {
    for (int slot : kUsed) EXPECT_EQ(map.LiveReplicasOf(slot), 1) << slot;
  }
  // 09da39b2's replica stopped too: SHARDS lists it failed, SLOTS no more.
  for (const SlotMap& map : {Shards("shards_master_down"), Slots("slots_master_down")}) {
    EXPECT_EQ(map.LiveReplicasOf(12182), 0);
    EXPECT_EQ(map.LiveReplicasOf(9954), 1);
  }
  // The promoted replica serves 105 without a replica of its own (its old master is dead).
  EXPECT_EQ(Shards("shards_after_failover").LiveReplicasOf(105), 0);
  // The old master rejoined as its replica: SHARDS says "loading" (its sync not done), which
  // counts (it will confirm once synced; only "fail" does not); SLOTS lists no health.
  EXPECT_EQ(Shards("shards_rejoined").LiveReplicasOf(105), 1);
  EXPECT_EQ(Slots("slots_rejoined").LiveReplicasOf(105), 1);
  SlotMap moved = Shards("shards_ok");
  moved.LearnMoved(12182, Local(48079));
  EXPECT_EQ(moved.LiveReplicasOf(12182), 1) << "a known master: its replicas are known";
  moved.LearnMoved(0, keys::NodeAddress{"10.9.9.9", 7000});
  EXPECT_EQ(moved.LiveReplicasOf(0), std::nullopt) << "until the next read";
  EXPECT_EQ(SlotMap().LiveReplicasOf(0), std::nullopt);
  EXPECT_EQ(moved.LiveReplicasOf(keys::kClusterSlots), std::nullopt);
}

TEST(SlotMapTest, AnEmptyMapServesNothing) {
  const SlotMap map;
  EXPECT_EQ(map.ShardOf(0), nullptr);
  EXPECT_FALSE(map.Serves(kUsed));
  EXPECT_TRUE(map.Masters().empty());
  EXPECT_TRUE(map.RefreshCandidates().empty());
  EXPECT_FALSE(map.IsFailover(0, Shards("shards_ok")));
}

}  // namespace
}  // namespace streamcar::redis
