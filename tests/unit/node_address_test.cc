// Node addresses: as a user configures them (seeds, sentinels) and as Redis announces them in
// -MOVED and -ASK (the redirect endpoints below are what redis-server 7.0.15 sent).

#include "sidecar/keys/node_address.h"

#include <gtest/gtest.h>

#include <string>

namespace streamcar::redis {
namespace {

TEST(NodeAddressTest, ParsesHostPortAndBracketedIpv6) {
  struct Case {
    const char* text;
    const char* host;
    int port;
    const char* described;
  };
  for (const Case& c : {Case{"redis-0.redis:6379", "redis-0.redis", 6379, "redis-0.redis:6379"},
                        Case{"10.0.0.5:7001", "10.0.0.5", 7001, "10.0.0.5:7001"},
                        Case{"[::1]:6379", "::1", 6379, "[::1]:6379"},
                        Case{"[fe80::1%eth0]:26379", "fe80::1%eth0", 26379, "[fe80::1%eth0]:26379"},
                        Case{"h:1", "h", 1, "h:1"}, Case{"h:65535", "h", 65535, "h:65535"}}) {
    std::string error;
    const auto address = keys::ParseNodeAddress(c.text, &error);
    ASSERT_TRUE(address) << c.text << ": " << error;
    EXPECT_EQ(address->host, c.host) << c.text;
    EXPECT_EQ(address->port, c.port) << c.text;
    EXPECT_EQ(address->Describe(), c.described) << c.text;
    EXPECT_EQ(keys::ParseNodeAddress(address->Describe(), nullptr), address) << c.text;
  }
}

TEST(NodeAddressTest, RefusesWithAReason) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c :
       {Case{"", "empty"}, Case{"redis", "no port"}, Case{"redis:", "no port after ':'"},
        Case{":6379", "no host"}, Case{"redis:abc", "port \"abc\" is not a number from 1 to 65535"},
        Case{"redis:0", "port \"0\" is not a number from 1 to 65535"},
        Case{"redis:65536", "port \"65536\""}, Case{"redis:+1", "port \"+1\""},
        Case{"redis:123456", "port \"123456\""},
        Case{"::1:6379", "an IPv6 address needs brackets: [::1]:6379"},
        Case{"[::1", "no ']' closes"}, Case{"[::1]", "no port"},
        Case{"[::1]6379", "expected ':' and a port after ']'"}, Case{"[]:6379", "empty host"},
        Case{"[redis]:6379", "brackets are for IPv6"}, Case{"redis://redis:6379", "a URL"},
        Case{"redis :6379", "spaces"}, Case{"redis:6379\n", "control"},
        Case{"user@redis:6379", "holds one of"}}) {
    std::string error;
    EXPECT_FALSE(keys::ParseNodeAddress(c.text, &error)) << c.text;
    EXPECT_NE(error.find(c.says), std::string::npos) << c.text << ": " << error;
  }
  // No error text asked for: still refused.
  EXPECT_FALSE(keys::ParseNodeAddress("redis", nullptr));
}

TEST(NodeAddressTest, RedirectEndpointSplitsAtTheLastColon) {
  // What redis-server 7.0.15 wrote after "-MOVED 12182 " with each cluster-preferred-endpoint-type
  // and announced address.
  struct Case {
    const char* text;
    const char* host;
    int port;
  };
  for (const Case& c : {Case{"127.0.0.1:44941", "127.0.0.1", 44941},
                        Case{"::1:44941", "::1", 44941},  // cluster-announce-ip ::1
                        Case{"node-44941.redis.test:44941", "node-44941.redis.test", 44941},
                        Case{"?:44941", "?", 44941},  // hostname preferred, none announced
                        Case{":44941", "", 44941},    // unknown-endpoint
                        Case{"[::1]:6379", "::1", 6379}}) {
    const auto address = keys::ParseRedirectEndpoint(c.text);
    ASSERT_TRUE(address) << c.text;
    EXPECT_EQ(address->host, c.host) << c.text;
    EXPECT_EQ(address->port, c.port) << c.text;
  }
  for (const char* bad :
       {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:x", "h:70000", "h h:1", "h:1 "}) {
    EXPECT_FALSE(keys::ParseRedirectEndpoint(bad)) << bad;
  }
}

TEST(NodeAddressTest, OrdersAndComparesByHostThenPort) {
  const keys::NodeAddress a{"a", 2};
  const keys::NodeAddress b{"a", 10};
  const keys::NodeAddress c{"b", 1};
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_EQ(a, (keys::NodeAddress{"a", 2}));
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace streamcar::redis
