// TLS to a real redis-server (--tls-port) with certificates generated for the test.

#include <gtest/gtest.h>

#include "sidecar/redis/connection.h"
#include "sidecar/redis/session.h"
#include "tests/support/redis_server.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::redis {
namespace {

using testing::RedisServer;
using testing::RedisServerOptions;

TEST(Tls, TrustedServerWorks) {
  RedisServer server(RedisServerOptions{.tls = true});
  auto c = Connection::Open(server.ClientOptions());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE((*c)->Run(Command("SET").Arg("k").Arg(std::string(100000, 'x'))).ok());
  auto got = (*c)->Run(Command("GET").Arg("k"));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->view().Str().size(), 100000u);  // many TLS records, read back whole
}

// Redis ends a TLS client with close_notify before its FIN: a pooled session sees that record as
// the end too, and connects again before its next command instead of failing it.
TEST(Tls, ASessionReplacesAConnectionRedisClosedWhileItSatUnused) {
  RedisServer server(RedisServerOptions{.tls = true});
  RedisHealth health;
  Session session(server.ClientOptions(), "test", &health);
  Millis retry_in{0};
  ASSERT_TRUE(session.ConnectOnce(&retry_in).ok());
  const uint64_t first = session.generation();
  auto id = session.Run(Command("CLIENT").Arg("ID"));
  ASSERT_TRUE(id.ok()) << id.status().message();
  // A second look while the connection is open keeps it (a TLS 1.3 session ticket is no end).
  ASSERT_TRUE(session.ConnectOnce(&retry_in).ok());
  EXPECT_EQ(session.generation(), first);
  server.Run({"CLIENT", "KILL", "ID", std::to_string(id->view().Integer())});
  EXPECT_TRUE(testing::Eventually(
      [&] { return session.ConnectOnce(&retry_in).ok() && session.generation() == first + 1; },
      Millis(2000)));
  EXPECT_TRUE(session.Run(Command("PING")).ok());
  EXPECT_EQ(session.lost_connections(), 0u);
}

TEST(Tls, UntrustedServerIsRefusedClearly) {
  RedisServer server(RedisServerOptions{.tls = true});
  auto options = server.ClientOptions();
  options.tls.ca_file = server.certificates().other_ca_cert;
  auto c = Connection::Open(options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFatal);
  EXPECT_NE(c.status().message().find("not trusted"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("certificate"), std::string::npos);
}

TEST(Tls, SystemTrustStoreDoesNotTrustATestCa) {
  RedisServer server(RedisServerOptions{.tls = true});
  auto options = server.ClientOptions();
  options.tls.ca_file = "";
  auto c = Connection::Open(options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFatal);
}

TEST(Tls, ServerNameIsVerified) {
  RedisServer server(RedisServerOptions{.tls = true});
  auto options = server.ClientOptions();
  options.tls.server_name = "localhost";  // in the certificate
  EXPECT_TRUE(Connection::Open(options).ok());
  options.tls.server_name = "redis.example.com";  // not in it
  auto c = Connection::Open(options);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("redis.example.com"), std::string::npos)
      << c.status().message();
}

TEST(Tls, VerifyFalseAcceptsAnyCertificate) {
  RedisServer server(RedisServerOptions{.tls = true});
  auto options = server.ClientOptions();
  options.tls.ca_file = server.certificates().other_ca_cert;
  options.tls.verify = false;
  auto c = Connection::Open(options);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE((*c)->Run(Command("PING")).ok());
}

TEST(Tls, MutualTlsNeedsTheClientCertificate) {
  RedisServer server(RedisServerOptions{.tls = true, .tls_auth_clients = "yes"});
  auto with_cert = Connection::Open(server.ClientOptions());
  ASSERT_TRUE(with_cert.ok()) << with_cert.status().message();
  EXPECT_TRUE((*with_cert)->Run(Command("PING")).ok());

  auto options = server.ClientOptions();
  options.tls.cert_file.clear();
  options.tls.key_file.clear();
  auto without = Connection::Open(options);
  ASSERT_FALSE(without.ok());
  EXPECT_EQ(without.status().code(), StatusCode::kFatal) << without.status().message();
}

TEST(Tls, UnreadableClientKeyIsFatalWithoutItsContents) {
  RedisServer server(RedisServerOptions{.tls = true, .tls_auth_clients = "yes"});
  auto options = server.ClientOptions();
  options.tls.key_file = "/nonexistent/client.key";
  auto c = Connection::Open(options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFatal);
  EXPECT_NE(c.status().message().find("redis.tls.key_file"), std::string::npos);
}

TEST(Tls, PlainClientOnATlsPortIsAnIoErrorNotAHang) {
  RedisServer server(RedisServerOptions{.tls = true});
  auto options = server.ClientOptions();
  options.endpoint.kind = config::RedisEndpoint::Kind::kTcp;
  options.connect_timeout = Millis(1000);
  options.command_timeout = Millis(10000);
  const auto started = SteadyClock::now();
  auto c = Connection::Open(options);
  const auto took = SteadyClock::now() - started;
  ASSERT_FALSE(c.ok());
  // The server closes the connection on the plain-text bytes: an I/O error at once, not a wait
  // for the command timeout.
  EXPECT_EQ(c.status().code(), StatusCode::kIo) << c.status().message();
  EXPECT_LT(took, Millis(5000));
}

}  // namespace
}  // namespace streamcar::redis
