// Sentinel replies as redis-server 7.0.15 in sentinel mode (and its data nodes) sent them: one
// master, one replica, one sentinel (quorum 1), and a SENTINEL FAILOVER.

#include "sidecar/redis/topology/sentinel_proto.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/resp_reply.h"

namespace streamcar::redis {
namespace {

using testing::Arr;
using testing::Bulk;
using testing::Err;
using testing::Int;
using testing::Nil;
using testing::NilArray;
using testing::ReplyOf;

TEST(SentinelProtoTest, MasterAddressFromGetMasterAddrByName) {
  // Recorded: "*2\r\n$9\r\n127.0.0.1\r\n$5\r\n38113\r\n".
  const Reply reply = ReplyOf("*2\r\n$9\r\n127.0.0.1\r\n$5\r\n38113\r\n");
  const auto address = ParseMasterAddr(reply.view());
  ASSERT_TRUE(address);
  EXPECT_EQ(*address, (keys::NodeAddress{"127.0.0.1", 38113}));
  EXPECT_EQ(ParseMasterAddr(ReplyOf(Arr({Bulk("::1"), Bulk("6379")})).view()),
            (keys::NodeAddress{"::1", 6379}));
  EXPECT_EQ(ParseMasterAddr(ReplyOf(Arr({Bulk("redis-0"), Int(6379)})).view()),
            (keys::NodeAddress{"redis-0", 6379}));
  // Recorded for a name the sentinel does not monitor: a nil array.
  EXPECT_FALSE(ParseMasterAddr(ReplyOf(NilArray()).view()));
  EXPECT_FALSE(ParseMasterAddr(ReplyOf(Nil()).view()));
  EXPECT_FALSE(ParseMasterAddr(ReplyOf(Err("WRONGPASS invalid username-password pair")).view()));
  for (const std::string& bad :
       {Arr({Bulk("h")}), Arr({Bulk("h"), Bulk("0")}), Arr({Bulk("h"), Bulk("x")}),
        Arr({Bulk(""), Bulk("1")}), Arr({Bulk("h"), Bulk("1"), Bulk("2")}),
        Arr({Int(1), Bulk("1")}), Arr({Bulk("h h"), Bulk("1")}), Arr({Bulk("h"), Int(70000)})}) {
    EXPECT_FALSE(ParseMasterAddr(ReplyOf(bad).view())) << bad;
  }
}

TEST(SentinelProtoTest, RoleSaysWhetherTheNodeIsTheMaster) {
  // Recorded ROLE replies: the master, its replica, the demoted master right after the failover,
  // and the sentinel itself.
  EXPECT_TRUE(RoleIsMaster(ReplyOf("*3\r\n$6\r\nmaster\r\n:157\r\n*0\r\n").view()));
  EXPECT_FALSE(RoleIsMaster(ReplyOf("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:38113\r\n$9\r\n"
                                    "connected\r\n:291\r\n")
                                .view()));
  EXPECT_FALSE(RoleIsMaster(ReplyOf("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:40655\r\n$9\r\n"
                                    "handshake\r\n:-1\r\n")
                                .view()));
  EXPECT_FALSE(RoleIsMaster(ReplyOf("*2\r\n$8\r\nsentinel\r\n*1\r\n$8\r\nmymaster\r\n").view()));
  EXPECT_FALSE(RoleIsMaster(ReplyOf(Err("NOPERM this user has no permissions")).view()));
  EXPECT_FALSE(RoleIsMaster(ReplyOf(Bulk("master")).view()));
  EXPECT_FALSE(RoleIsMaster(ReplyOf(Arr({})).view()));
}

TEST(SentinelProtoTest, SwitchMasterNamesTheNewMaster) {
  // Recorded on +switch-master after SENTINEL FAILOVER mymaster.
  const auto recorded = ParseSwitchMaster("mymaster 127.0.0.1 38113 127.0.0.1 40655");
  ASSERT_TRUE(recorded);
  EXPECT_EQ(recorded->first, "mymaster");
  EXPECT_EQ(recorded->second, (keys::NodeAddress{"127.0.0.1", 40655}));
  const auto v6 = ParseSwitchMaster("m ::1 6379 fe80::2 6380");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->second, (keys::NodeAddress{"fe80::2", 6380}));
  for (const char* bad :
       {"", "mymaster", "mymaster 127.0.0.1 38113 127.0.0.1",
        "mymaster 127.0.0.1 38113 127.0.0.1 40655 extra", "mymaster 127.0.0.1 38113 127.0.0.1 0",
        "mymaster 127.0.0.1 38113 127.0.0.1 x", "mymaster 127.0.0.1 x 127.0.0.1 40655",
        " 127.0.0.1 38113 127.0.0.1 40655", "mymaster  127.0.0.1 38113 127.0.0.1 40655",
        "mymaster 127.0.0.1 38113  40655"}) {
    EXPECT_FALSE(ParseSwitchMaster(bad)) << bad;
  }
}

}  // namespace
}  // namespace streamcar::redis
