#include "sidecar/config/redis_url.h"

#include <gtest/gtest.h>

namespace streamcar::config {
namespace {

RedisEndpoint Parse(const std::string& url) {
  std::string error;
  auto endpoint = ParseRedisUrl(url, &error);
  EXPECT_TRUE(endpoint.has_value()) << url << ": " << error;
  return endpoint.value_or(RedisEndpoint{});
}

TEST(RedisUrl, Tcp) {
  auto e = Parse("redis://cache.local:6380/3");
  EXPECT_EQ(e.kind, RedisEndpoint::Kind::kTcp);
  EXPECT_EQ(e.host, "cache.local");
  EXPECT_EQ(e.port, 6380);
  EXPECT_EQ(e.db, 3);
}

TEST(RedisUrl, DefaultsPortAndDb) {
  auto e = Parse("redis://r");
  EXPECT_EQ(e.port, 6379);
  EXPECT_EQ(e.db, 0);
}

TEST(RedisUrl, Credentials) {
  auto e = Parse("redis://app:p%40ss@r:6379/0");
  EXPECT_EQ(e.username, "app");
  EXPECT_EQ(e.password, "p@ss");  // percent-decoded
  EXPECT_EQ(e.Describe(), "redis://app:***@r:6379/0");
}

TEST(RedisUrl, Tls) { EXPECT_EQ(Parse("rediss://r:6390").kind, RedisEndpoint::Kind::kTls); }

TEST(RedisUrl, Ipv6) {
  auto e = Parse("redis://[::1]:7000/1");
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 7000);
  EXPECT_EQ(e.db, 1);
}

TEST(RedisUrl, UnixSocket) {
  auto e = Parse("unix:///run/redis/redis.sock?db=2");
  EXPECT_EQ(e.kind, RedisEndpoint::Kind::kUnix);
  EXPECT_EQ(e.path, "/run/redis/redis.sock");
  EXPECT_EQ(e.db, 2);
}

TEST(RedisUrl, RejectsBadInput) {
  std::string error;
  for (const char* bad : {"http://r", "redis://", "redis://r:0", "redis://r:abc", "redis://r/x",
                          "unix://rel.sock", "unix:///s.sock?x=1", "redis://[::1"}) {
    EXPECT_FALSE(ParseRedisUrl(bad, &error)) << bad;
    EXPECT_FALSE(error.empty());
  }
}

TEST(RedisUrl, MasksPasswordInText) {
  EXPECT_EQ(MaskUrlPassword("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
  EXPECT_EQ(MaskUrlPassword("redis://h:1/0"), "redis://h:1/0");
  EXPECT_EQ(MaskUrlPassword("redis://user@h:1/0"), "redis://user@h:1/0");
}

// Credentials as query parameters (review F7, issue 29): libpq reads password, sslpassword and
// oauth_client_secret from the URI, percent-decoded names included.
TEST(RedisUrl, MasksCredentialParametersInTheQuery) {
  EXPECT_EQ(MaskUrlPassword("postgres://bob:P4@h/db?password=P5"),
            "postgres://bob:***@h/db?password=***");
  EXPECT_EQ(MaskUrlPassword("postgresql://h:1/db?user=bob&password=P7&sslpassword=P8"),
            "postgresql://h:1/db?user=bob&password=***&sslpassword=***");
  EXPECT_EQ(MaskUrlPassword("postgres:///db?host=/run&PASSWORD=a&pass%77ord=b&%70assword=c"),
            "postgres:///db?host=/run&PASSWORD=***&pass%77ord=***&%70assword=***");
  EXPECT_EQ(MaskUrlPassword("postgres://h/db?oauth_client_secret=s&auth_token=t&passfile=/p"),
            "postgres://h/db?oauth_client_secret=***&auth_token=***&passfile=***");
  EXPECT_EQ(MaskUrlPassword("redis://h:1/0?password=x#frag"), "redis://h:1/0?password=***#frag");
  // Nothing secret: unchanged, empty values and names without '=' included.
  for (const char* plain : {"postgres://h/db?sslmode=require&application_name=sc",
                            "postgres://h/db?password=&x", "postgres://h/db?", "sqlite:///a?b"}) {
    EXPECT_EQ(MaskUrlPassword(plain), plain);
  }
  // A password holding '?' or '&' is still the user info's, masked whole.
  EXPECT_EQ(MaskUrlPassword("redis://u:a?b&password=c@h:1/0"), "redis://u:***@h:1/0");
}

}  // namespace
}  // namespace streamcar::config
