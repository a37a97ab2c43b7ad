// The Redis seam against a real redis-server: AUTH and ACL users, unix sockets, pipelines,
// deadlines, binary safety, reconnects.

#include <gtest/gtest.h>

#include "sidecar/redis/session.h"
#include "tests/support/redis_server.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::redis {
namespace {

using testing::RedisServer;
using testing::RedisServerOptions;

ConnectionOptions OptionsFor(const RedisServer& server) {
  ConnectionOptions options = server.ClientOptions();
  options.connect_timeout = Millis(1000);
  options.command_timeout = Millis(1000);
  return options;
}

TEST(Connection, RunsCommandsAndPipelinesInOrder) {
  RedisServer server;
  auto c = Connection::Open(OptionsFor(server));
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto pong = (*c)->Run(Command("PING"));
  ASSERT_TRUE(pong.ok());
  EXPECT_EQ(pong->view().Str(), "PONG");
  std::vector<Command> commands;
  for (int i = 0; i < 200; ++i) commands.push_back(Command("INCR").Arg("counter"));
  auto replies = (*c)->RunPipeline(commands);
  ASSERT_TRUE(replies.ok());
  ASSERT_EQ(replies->size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ((*replies)[i].view().Integer(), i + 1);
}

TEST(Connection, IsBinarySafe) {
  RedisServer server;
  auto c = Connection::Open(OptionsFor(server));
  ASSERT_TRUE(c.ok());
  const std::string value("\x00\xFF\r\n$3\r\n", 9);
  ASSERT_TRUE((*c)->Run(Command("SET").Arg(std::string("k\0ey", 4)).Arg(value)).ok());
  auto got = (*c)->Run(Command("GET").Arg(std::string("k\0ey", 4)));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->view().Str(), value);
}

TEST(Connection, ServerErrorsCarryTheirPrefix) {
  RedisServer server;
  auto c = Connection::Open(OptionsFor(server));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Run(Command("SET").Arg("s").Arg("v")).ok());
  auto wrong = (*c)->Run(Command("XLEN").Arg("s"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kServerError);
  EXPECT_EQ(wrong.status().server_prefix(), "WRONGTYPE");
  EXPECT_FALSE((*c)->broken());  // an error reply leaves the connection usable
  EXPECT_TRUE((*c)->Run(Command("PING")).ok());
}

TEST(Connection, PasswordAuth) {
  RedisServer server(RedisServerOptions{.password = "s3cret"});
  auto options = OptionsFor(server);
  options.password = "s3cret";
  EXPECT_TRUE(Connection::Open(options).ok());

  options.password = "wrong-password";
  auto refused = Connection::Open(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFatal);
  EXPECT_NE(refused.status().message().find("WRONGPASS"), std::string::npos);
  EXPECT_EQ(refused.status().message().find("wrong-password"), std::string::npos);

  options.password = "";
  auto missing = Connection::Open(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kFatal);
  EXPECT_NE(missing.status().message().find("requires authentication"), std::string::npos);
}

TEST(Connection, AclUserRestrictedToItsKeys) {
  RedisServer server;
  server.Run({"ACL", "SETUSER", "app", "on", ">apppw", "~orders*", "+@all"});
  auto options = OptionsFor(server);
  options.username = "app";
  options.password = "apppw";
  auto c = Connection::Open(options);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE((*c)->Run(Command("XADD").Arg("orders").Arg("*").Arg("a").Arg("1")).ok());
  auto denied = (*c)->Run(Command("SET").Arg("other").Arg("x"));
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().server_prefix(), "NOPERM");
  options.password = "nope";
  EXPECT_EQ(Connection::Open(options).status().code(), StatusCode::kFatal);
}

TEST(Connection, UnixSocket) {
  RedisServer server(RedisServerOptions{.unix_socket = true});
  ConnectionOptions options;
  options.endpoint.kind = config::RedisEndpoint::Kind::kUnix;
  options.endpoint.path = server.socket_path();
  auto c = Connection::Open(options);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE((*c)->Run(Command("PING")).ok());
}

TEST(Connection, SelectsTheDatabaseOfTheUrl) {
  RedisServer server;
  auto options = OptionsFor(server);
  options.endpoint.db = 3;
  auto c = Connection::Open(options);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Run(Command("SET").Arg("in3").Arg("x")).ok());
  auto other = Connection::Open(OptionsFor(server));
  EXPECT_TRUE((*other)->Run(Command("GET").Arg("in3"))->IsNil());
}

TEST(Connection, UnreachableIsAnIoError) {
  ConnectionOptions options;
  options.endpoint.host = "127.0.0.1";
  options.endpoint.port = testing::FreePort();
  options.connect_timeout = Millis(500);
  auto c = Connection::Open(options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kIo);
}

TEST(Connection, BlockingReadWaitsPastTheCommandTimeout) {
  RedisServer server;
  auto options = OptionsFor(server);
  options.command_timeout = Millis(400);
  auto c = Connection::Open(options);
  ASSERT_TRUE(c.ok());
  // BLOCK 1 s with a 400 ms command timeout: the socket deadline must sit above BLOCK, so the
  // read outlives the command timeout by far. (The 400 ms margin is the time Redis may take to
  // notice its own BLOCK timeout on a machine loaded by sanitizer builds.)
  const auto start = SteadyClock::now();
  auto reply = (*c)->RunBlocking(
      Command("XREAD").Arg("BLOCK").Arg(int64_t{1000}).Arg("STREAMS").Arg("nothing").Arg("$"),
      Millis(1000));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_TRUE(reply->IsNil());
  EXPECT_GE(SteadyClock::now() - start, Millis(900));
}

TEST(Connection, SlowCommandTimesOutAndBreaksTheConnection) {
  RedisServer server(RedisServerOptions{.extra = {"--enable-debug-command", "yes"}});
  auto options = OptionsFor(server);
  options.command_timeout = Millis(100);
  auto c = Connection::Open(options);
  ASSERT_TRUE(c.ok());
  auto slow = (*c)->Run(Command("DEBUG").Arg("SLEEP").Arg("0.5"));
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().code(), StatusCode::kTimeout);
  EXPECT_TRUE((*c)->broken());
}

TEST(Session, ReconnectsAfterARestartAndReportsHealth) {
  RedisServer server(RedisServerOptions{.append_only = true});
  RedisHealth health;
  Session session(OptionsFor(server), "test", &health);
  StopSignal stop;
  EXPECT_FALSE(health.up());
  ASSERT_TRUE(session.EnsureConnected(stop).ok());
  EXPECT_TRUE(health.up());
  ASSERT_TRUE(session.Run(Command("SET").Arg("k").Arg("v")).ok());
  server.Kill();
  EXPECT_FALSE(session.Run(Command("GET").Arg("k")).ok());
  EXPECT_FALSE(health.up());
  server.Start();
  ASSERT_TRUE(session.EnsureConnected(stop).ok());
  EXPECT_TRUE(health.up());
  auto value = session.Run(Command("GET").Arg("k"));
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value->view().Str(), "v");  // AOF kept it
}

// A session that sat unused while Redis restarted (the API's pooled sessions) connects again
// before its next command instead of failing it: the server's close is seen at once.
TEST(Session, ReplacesAConnectionRedisClosedWhileItSatUnused) {
  RedisServer server(RedisServerOptions{.append_only = true});
  RedisHealth health;
  Session session(OptionsFor(server), "test", &health);
  Millis retry_in{0};
  ASSERT_TRUE(session.ConnectOnce(&retry_in).ok());
  ASSERT_TRUE(session.Run(Command("SET").Arg("k").Arg("v")).ok());
  const uint64_t first = session.generation();
  server.Kill();
  server.Start();
  ASSERT_TRUE(session.ConnectOnce(&retry_in).ok());
  EXPECT_EQ(session.generation(), first + 1);
  auto value = session.Run(Command("GET").Arg("k"));
  ASSERT_TRUE(value.ok()) << value.status().message();
  EXPECT_EQ(value->view().Str(), "v");
  EXPECT_EQ(session.lost_connections(), 0u);  // nothing was sent on the closed one

  // Closed by the server while Redis stays up (CLIENT KILL; its idle `timeout` is the same).
  const int64_t id = session.Run(Command("CLIENT").Arg("ID"))->view().Integer();
  server.Run({"CLIENT", "KILL", "ID", std::to_string(id)});
  // Redis closes the socket before it answers CLIENT KILL, but on a loaded machine the close
  // may reach this end a moment after the answer: a look before it finds the connection open.
  EXPECT_TRUE(testing::Eventually(
      [&] { return session.ConnectOnce(&retry_in).ok() && session.generation() == first + 2; },
      Millis(2000)));
  EXPECT_TRUE(session.Run(Command("PING")).ok());
  EXPECT_TRUE(health.up());
}

TEST(Session, EnsureConnectedStopsOnRequest) {
  ConnectionOptions options;
  options.endpoint.host = "127.0.0.1";
  options.endpoint.port = testing::FreePort();
  RedisHealth health;
  Session session(options, "test", &health);
  StopSignal stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(Millis(300));
    stop.Request();
  });
  EXPECT_EQ(session.EnsureConnected(stop).code(), StatusCode::kCancelled);
  stopper.join();
}

}  // namespace
}  // namespace streamcar::redis
