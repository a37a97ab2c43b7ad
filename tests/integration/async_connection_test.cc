// The loop-driven Redis connection against a real redis-server: the cases of
// connection_test.cc and tls_test.cc on the async path, plus what only it does (callbacks failed
// with `written`, reconnects, CLIENT UNBLOCK, scripts loaded again).

#include "sidecar/redis/async_connection.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/redis/socket_util.h"
#include "tests/support/redis_server.h"

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

// A loop on the system clock, its connector, and connections on it; the test thread runs the
// loop until what it waits for has happened.
class Harness {
 public:
  Harness() {
    auto loop = EventLoop::Create(SystemClock::Instance());
    EXPECT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = std::move(*loop);
    loop_->SetFatalHook([](const Status& s) { ADD_FAILURE() << s.ToString(); });
    connector_ = std::make_unique<Connector>(*loop_);
  }
  ~Harness() {
    connections_.clear();
    connector_.reset();  // waits for openings still running
    loop_.reset();
  }

  AsyncConnection& Open(ConnectionOptions options, std::vector<const Script*> scripts = {},
                        RedisHealth* health = nullptr) {
    connections_.push_back(std::make_unique<AsyncConnection>(
        *loop_, *connector_, std::move(options), "test", health, scripts));
    AsyncConnection& c = *connections_.back();
    c.OnFatal([this](const Status& s) { fatal_ = s; });
    return c;
  }

  // Runs the loop until `condition` holds; false after `timeout`.
  bool RunUntil(const std::function<bool()>& condition, Millis timeout = Millis(20000)) {
    const SteadyTime deadline = SteadyClock::now() + timeout;
    while (!condition()) {
      if (SteadyClock::now() >= deadline) return false;
      loop_->RunOnce(Millis(50));
    }
    return true;
  }

  StatusOr<Reply> Call(AsyncConnection& c, Command command) {
    std::optional<StatusOr<Reply>> result;
    c.Send(std::move(command), [&](StatusOr<Reply> r) { result = std::move(r); });
    if (!RunUntil([&] { return result.has_value(); })) {
      return Status(StatusCode::kTimeout, "the test waited in vain");
    }
    return std::move(*result);
  }

  BatchResult CallBatch(AsyncConnection& c, std::vector<Command> commands, Millis timeout) {
    std::optional<BatchResult> result;
    c.SendBatch(commands, timeout, [&](BatchResult r) { result = std::move(r); });
    if (!RunUntil([&] { return result.has_value(); })) {
      return BatchResult{{}, Status(StatusCode::kTimeout, "the test waited in vain"), false};
    }
    return std::move(*result);
  }

  EventLoop& loop() { return *loop_; }
  const std::optional<Status>& fatal() const { return fatal_; }

 private:
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Connector> connector_;
  std::vector<std::unique_ptr<AsyncConnection>> connections_;
  std::optional<Status> fatal_;
};

TEST(AsyncConnection, RunsCommandsAndPipelinesInOrder) {
  RedisServer server;
  Harness h;
  AsyncConnection& c = h.Open(OptionsFor(server));
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  EXPECT_EQ(c.generation(), 1u);
  auto pong = h.Call(c, Command("PING"));
  ASSERT_TRUE(pong.ok()) << pong.status().ToString();
  EXPECT_EQ(pong->view().Str(), "PONG");

  std::vector<Command> commands;
  for (int i = 0; i < 200; ++i) commands.push_back(Command("INCR").Arg("counter"));
  BatchResult batch = h.CallBatch(c, std::move(commands), Millis(5000));
  ASSERT_TRUE(batch.failure.ok()) << batch.failure.ToString();
  ASSERT_EQ(batch.replies.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(batch.replies[i].view().Integer(), i + 1);

  // Many sends queued at once: pipelined, each callback gets its own reply, in order.
  std::vector<int64_t> seen;
  for (int i = 0; i < 300; ++i) {
    c.Send(Command("INCR").Arg("counter"), [&](StatusOr<Reply> r) {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      seen.push_back(r->view().Integer());
    });
  }
  EXPECT_TRUE(seen.empty());  // never inside Send
  ASSERT_TRUE(h.RunUntil([&] { return seen.size() == 300; }));
  for (int i = 0; i < 300; ++i) EXPECT_EQ(seen[i], 201 + i);
  EXPECT_EQ(c.outstanding(), 0u);
}

TEST(AsyncConnection, IsBinarySafe) {
  RedisServer server;
  Harness h;
  AsyncConnection& c = h.Open(OptionsFor(server));
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  const std::string value("\x00\xFF\r\n$3\r\n", 9);
  ASSERT_TRUE(h.Call(c, Command("SET").Arg(std::string("k\0ey", 4)).Arg(value)).ok());
  auto got = h.Call(c, Command("GET").Arg(std::string("k\0ey", 4)));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->view().Str(), value);
  // A value much larger than the socket buffers goes out over several writes and comes back in
  // several reads.
  const std::string big(4 << 20, 'b');
  ASSERT_TRUE(h.Call(c, Command("SET").Arg("big").Arg(big)).ok());
  auto back = h.Call(c, Command("GET").Arg("big"));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->view().Str(), big);
}

TEST(AsyncConnection, ErrorRepliesStayRepliesAndLeaveTheConnectionUsable) {
  RedisServer server;
  Harness h;
  AsyncConnection& c = h.Open(OptionsFor(server));
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  ASSERT_TRUE(h.Call(c, Command("SET").Arg("s").Arg("v")).ok());
  std::vector<Command> commands;
  commands.push_back(Command("XLEN").Arg("s"));
  commands.push_back(Command("PING"));
  BatchResult batch = h.CallBatch(c, std::move(commands), Millis(1000));
  ASSERT_TRUE(batch.failure.ok());
  ASSERT_EQ(batch.replies.size(), 2u);
  EXPECT_TRUE(batch.replies[0].IsError());
  EXPECT_EQ(batch.replies[1].view().Str(), "PONG");

  auto wrong = h.Call(c, Command("XLEN").Arg("s"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kServerError);
  EXPECT_EQ(wrong.status().server_prefix(), "WRONGTYPE");
  EXPECT_TRUE(c.ready());
  EXPECT_EQ(c.generation(), 1u);
  EXPECT_TRUE(h.Call(c, Command("PING")).ok());
}

TEST(AsyncConnection, PasswordAuth) {
  RedisServer server(RedisServerOptions{.password = "s3cret"});
  auto options = OptionsFor(server);
  {
    Harness h;
    options.password = "s3cret";
    AsyncConnection& c = h.Open(options);
    ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  }
  {
    Harness h;
    options.password = "wrong-password";
    AsyncConnection& c = h.Open(options);
    ASSERT_TRUE(h.RunUntil([&] { return h.fatal().has_value(); }));
    EXPECT_EQ(h.fatal()->code(), StatusCode::kFatal);
    EXPECT_NE(h.fatal()->message().find("WRONGPASS"), std::string::npos);
    EXPECT_EQ(h.fatal()->message().find("wrong-password"), std::string::npos);
    EXPECT_FALSE(c.ready());
  }
  {
    Harness h;
    options.password = "";
    h.Open(options);
    ASSERT_TRUE(h.RunUntil([&] { return h.fatal().has_value(); }));
    EXPECT_EQ(h.fatal()->code(), StatusCode::kFatal);
    EXPECT_NE(h.fatal()->message().find("requires authentication"), std::string::npos);
  }
}

TEST(AsyncConnection, AclUserRestrictedToItsKeys) {
  RedisServer server;
  server.Run({"ACL", "SETUSER", "app", "on", ">apppw", "~orders*", "+@all"});
  auto options = OptionsFor(server);
  options.username = "app";
  options.password = "apppw";
  Harness h;
  AsyncConnection& c = h.Open(options);
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  EXPECT_TRUE(h.Call(c, Command("XADD").Arg("orders").Arg("*").Arg("a").Arg("1")).ok());
  auto denied = h.Call(c, Command("SET").Arg("other").Arg("x"));
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().server_prefix(), "NOPERM");
}

TEST(AsyncConnection, UnixSocket) {
  RedisServer server(RedisServerOptions{.unix_socket = true});
  ConnectionOptions options;
  options.endpoint.kind = config::RedisEndpoint::Kind::kUnix;
  options.endpoint.path = server.socket_path();
  Harness h;
  AsyncConnection& c = h.Open(options);
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  EXPECT_TRUE(h.Call(c, Command("PING")).ok());
}

TEST(AsyncConnection, SelectsTheDatabaseOfTheUrl) {
  RedisServer server;
  auto options = OptionsFor(server);
  options.endpoint.db = 3;
  Harness h;
  AsyncConnection& c = h.Open(options);
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  ASSERT_TRUE(h.Call(c, Command("SET").Arg("in3").Arg("x")).ok());
  EXPECT_TRUE(server.Run({"GET", "in3"}).IsNil());  // database 0
}

TEST(AsyncConnection, WhileRedisIsDownSendsFailUnwrittenAndItConnectsOnceRedisIsBack) {
  RedisServer server;
  server.Kill();
  Harness h;
  RedisHealth health;
  AsyncConnection& c = h.Open(OptionsFor(server), {}, &health);
  EXPECT_FALSE(health.up());
  BatchResult refused = h.CallBatch(c, {Command("PING")}, Millis(1000));
  EXPECT_EQ(refused.failure.code(), StatusCode::kIo);
  EXPECT_FALSE(refused.written);
  EXPECT_FALSE(c.ready());
  server.Start();
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));  // retried with backoff meanwhile
  EXPECT_TRUE(health.up());
  EXPECT_EQ(c.generation(), 1u);
  EXPECT_TRUE(h.Call(c, Command("PING")).ok());
}

TEST(AsyncConnection, BlockingReadWaitsPastTheCommandTimeout) {
  RedisServer server;
  auto options = OptionsFor(server);
  options.command_timeout = Millis(400);
  Harness h;
  AsyncConnection& c = h.Open(options);
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  // BLOCK 1 s with a 400 ms command timeout (the margin as in connection_test.cc).
  const auto start = SteadyClock::now();
  std::optional<StatusOr<Reply>> reply;
  c.SendBlocking(
      Command("XREAD").Arg("BLOCK").Arg(int64_t{1000}).Arg("STREAMS").Arg("nothing").Arg("$"),
      Millis(1000), [&](StatusOr<Reply> r) { reply = std::move(r); });
  ASSERT_TRUE(h.RunUntil([&] { return reply.has_value(); }));
  ASSERT_TRUE(reply->ok()) << reply->status().ToString();
  EXPECT_TRUE((*reply)->IsNil());
  EXPECT_GE(SteadyClock::now() - start, Millis(900));
  EXPECT_EQ(c.generation(), 1u);
}

TEST(AsyncConnection, ASlowCommandFailsEveryOutstandingCallbackAndTheConnectionComesBack) {
  RedisServer server(RedisServerOptions{.extra = {"--enable-debug-command", "yes"}});
  auto options = OptionsFor(server);
  options.command_timeout = Millis(100);
  Harness h;
  AsyncConnection& c = h.Open(options);
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  std::optional<BatchResult> slow;
  std::vector<Status> after;
  c.SendBatch({Command("DEBUG").Arg("SLEEP").Arg("0.5"), Command("PING")}, Millis(100),
              [&](BatchResult r) { slow = std::move(r); });
  for (int i = 0; i < 3; ++i) {
    c.Send(Command("INCR").Arg("n"), Millis(5000),
           [&](StatusOr<Reply> r) { after.push_back(r.status()); });
  }
  EXPECT_EQ(c.outstanding(), 5u);
  ASSERT_TRUE(h.RunUntil([&] { return slow.has_value() && after.size() == 3; }));
  EXPECT_EQ(slow->failure.code(), StatusCode::kTimeout);
  EXPECT_TRUE(slow->written);
  EXPECT_TRUE(slow->replies.empty());
  for (const Status& s : after) EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  // It comes back by itself, as a new connection.
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  EXPECT_EQ(c.generation(), 2u);
  EXPECT_TRUE(h.Call(c, Command("PING")).ok());
}

TEST(AsyncConnection, ReconnectsAfterARestartAndReportsHealth) {
  RedisServer server(RedisServerOptions{.append_only = true});
  RedisHealth health;
  Harness h;
  AsyncConnection& c = h.Open(OptionsFor(server), {}, &health);
  EXPECT_FALSE(health.up());
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  EXPECT_TRUE(health.up());
  ASSERT_TRUE(h.Call(c, Command("SET").Arg("k").Arg("v")).ok());
  const auto first_id = c.client_id();
  EXPECT_TRUE(first_id.has_value());
  server.Kill();
  auto lost = h.Call(c, Command("GET").Arg("k"));
  EXPECT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), StatusCode::kIo) << lost.status().ToString();
  EXPECT_FALSE(health.up());
  server.Start();
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  EXPECT_TRUE(health.up());
  EXPECT_GE(c.generation(), 2u);
  auto value = h.Call(c, Command("GET").Arg("k"));
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(value->view().Str(), "v");  // AOF kept it
}

TEST(AsyncConnection, ClientUnblockEndsABlockingRead) {
  RedisServer server;
  Harness h;
  AsyncConnection& reader = h.Open(OptionsFor(server));
  AsyncConnection& other = h.Open(OptionsFor(server));
  ASSERT_TRUE(h.RunUntil([&] { return reader.ready() && other.ready(); }));
  ASSERT_TRUE(reader.client_id().has_value());
  const auto start = SteadyClock::now();
  std::optional<StatusOr<Reply>> read;
  reader.SendBlocking(
      Command("XREAD").Arg("BLOCK").Arg(int64_t{60000}).Arg("STREAMS").Arg("nothing").Arg("$"),
      Millis(60000), [&](StatusOr<Reply> r) { read = std::move(r); });
  // Unblock only once Redis has the read blocked (CLIENT UNBLOCK answers 0 before that).
  int64_t unblocked = 0;
  ASSERT_TRUE(h.RunUntil([&] {
    auto r = h.Call(other, Command("CLIENT").Arg("UNBLOCK").Arg(*reader.client_id()));
    if (r.ok()) unblocked = r->view().Integer();
    return unblocked == 1 || read.has_value();
  }));
  ASSERT_TRUE(h.RunUntil([&] { return read.has_value(); }));
  EXPECT_EQ(unblocked, 1);
  ASSERT_TRUE(read->ok()) << read->status().ToString();
  EXPECT_TRUE((*read)->IsNil());  // a timeout's answer, long before the 60 s
  EXPECT_LT(SteadyClock::now() - start, Millis(30000));
  EXPECT_EQ(reader.generation(), 1u);  // the connection stays
}

TEST(AsyncConnection, ScriptsAreLoadedAgainAfterAReconnect) {
  RedisServer server;
  const Script seven("return 7");
  Harness h;
  AsyncConnection& c = h.Open(OptionsFor(server), {&seven});
  int ready_calls = 0;
  c.OnReady([&] { ++ready_calls; });
  ASSERT_TRUE(h.RunUntil([&] { return ready_calls == 1; }));
  auto first = h.Call(c, seven.Call({}));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->view().Integer(), 7);
  // A restart without persistence forgets every script.
  server.Kill();
  server.Start();
  ASSERT_TRUE(h.RunUntil([&] {
    if (c.ready() && c.generation() == 1) h.Call(c, Command("PING"));  // notices the restart
    return ready_calls == 2;
  }));
  EXPECT_EQ(c.generation(), 2u);
  auto again = h.Call(c, seven.Call({}));
  ASSERT_TRUE(again.ok()) << again.status().ToString();  // not NOSCRIPT
  EXPECT_EQ(again->view().Integer(), 7);
}

TEST(AsyncConnection, ACallbackMayDestroyTheConnection) {
  RedisServer server;
  Harness h;
  auto options = OptionsFor(server);
  Connector connector(h.loop());
  auto c = std::make_unique<AsyncConnection>(h.loop(), connector, options, "test", nullptr,
                                             std::span<const Script* const>{});
  ASSERT_TRUE(h.RunUntil([&] { return c->ready(); }));
  int calls = 0;
  c->Send(Command("PING"), [&](StatusOr<Reply>) {
    ++calls;
    c.reset();
  });
  c->Send(Command("PING"), [&](StatusOr<Reply>) { ++calls; });  // dropped with the connection
  ASSERT_TRUE(h.RunUntil([&] { return c == nullptr; }));
  h.loop().RunOnce(Millis(0));
  EXPECT_EQ(calls, 1);
}

TEST(AsyncConnection, CloseFailsOutstandingCallbacksAndStaysClosed) {
  RedisServer server;
  Harness h;
  AsyncConnection& c = h.Open(OptionsFor(server));
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
  std::optional<Status> blocked;
  c.SendBlocking(
      Command("XREAD").Arg("BLOCK").Arg(int64_t{60000}).Arg("STREAMS").Arg("nothing").Arg("$"),
      Millis(60000), [&](StatusOr<Reply> r) { blocked = r.status(); });
  c.Close();
  ASSERT_TRUE(blocked.has_value());
  EXPECT_EQ(blocked->code(), StatusCode::kCancelled);
  EXPECT_FALSE(c.ready());
  BatchResult after = h.CallBatch(c, {Command("PING")}, Millis(1000));
  EXPECT_EQ(after.failure.code(), StatusCode::kCancelled);
  EXPECT_FALSE(after.written);
}

TEST(AsyncConnection, TlsTrustedServerWorks) {
  RedisServer server(RedisServerOptions{.tls = true});
  Harness h;
  AsyncConnection& c = h.Open(server.ClientOptions());
  ASSERT_TRUE(h.RunUntil([&] { return c.ready(); })) << (h.fatal() ? h.fatal()->ToString() : "");
  const std::string big(1 << 20, 'x');
  ASSERT_TRUE(h.Call(c, Command("SET").Arg("k").Arg(big)).ok());
  // Many TLS records, several pipelined: OpenSSL holds decrypted bytes the fd does not announce.
  std::vector<Command> gets;
  for (int i = 0; i < 5; ++i) gets.push_back(Command("GET").Arg("k"));
  BatchResult got = h.CallBatch(c, std::move(gets), Millis(10000));
  ASSERT_TRUE(got.failure.ok()) << got.failure.ToString();
  ASSERT_EQ(got.replies.size(), 5u);
  for (const Reply& r : got.replies) EXPECT_EQ(r.view().Str().size(), big.size());
}

TEST(AsyncConnection, TlsUntrustedServerIsFatalClearly) {
  RedisServer server(RedisServerOptions{.tls = true});
  auto options = server.ClientOptions();
  options.tls.ca_file = server.certificates().other_ca_cert;
  Harness h;
  AsyncConnection& c = h.Open(options);
  ASSERT_TRUE(h.RunUntil([&] { return h.fatal().has_value(); }));
  EXPECT_EQ(h.fatal()->code(), StatusCode::kFatal);
  EXPECT_NE(h.fatal()->message().find("not trusted"), std::string::npos) << h.fatal()->message();
  EXPECT_FALSE(c.ready());
}

TEST(AsyncConnection, TlsMutualNeedsTheClientCertificate) {
  RedisServer server(RedisServerOptions{.tls = true, .tls_auth_clients = "yes"});
  {
    Harness h;
    AsyncConnection& c = h.Open(server.ClientOptions());
    ASSERT_TRUE(h.RunUntil([&] { return c.ready(); }));
    EXPECT_TRUE(h.Call(c, Command("PING")).ok());
  }
  auto options = server.ClientOptions();
  options.tls.cert_file.clear();
  options.tls.key_file.clear();
  Harness h;
  h.Open(options);
  ASSERT_TRUE(h.RunUntil([&] { return h.fatal().has_value(); }));
  EXPECT_EQ(h.fatal()->code(), StatusCode::kFatal) << h.fatal()->ToString();
}

// The non-blocking half of the transports, under the loop's reads and writes.
void ExpectNonBlockingRoundTrip(const ConnectionOptions& options, bool tls) {
  SCOPED_TRACE(tls ? "tls" : "plain");
  auto transport = ConnectTransport(options.endpoint, options.tls, Millis(5000));
  ASSERT_TRUE(transport.ok()) << transport.status().ToString();
  Transport& t = **transport;
  char buffer[64];
  IoWait wait = IoWait::kWritable;
  // Nothing to read: returns at once with nothing, waiting for readability.
  auto none = t.TryRead(buffer, sizeof(buffer), &wait);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, 0u);
  EXPECT_EQ(wait, IoWait::kReadable);
  EXPECT_FALSE(t.HasBuffered());

  std::string_view ping = "PING\r\n";
  const SteadyTime deadline = SteadyClock::now() + Millis(10000);
  while (!ping.empty()) {
    auto n = t.TryWrite(ping, &wait);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ping.remove_prefix(*n);
    if (*n == 0) {
      ASSERT_TRUE(WaitReady(t.fd(), wait == IoWait::kReadable ? POLLIN : POLLOUT, deadline).ok());
    }
  }
  // One byte of "+PONG\r\n": TLS decrypted the whole record and holds the rest, which the fd
  // no longer announces; a socket holds nothing (the kernel does, and says so).
  std::string got;
  while (got.empty()) {
    auto n = t.TryRead(buffer, 1, &wait);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    got.append(buffer, *n);
    if (*n == 0) {
      ASSERT_TRUE(WaitReady(t.fd(), wait == IoWait::kReadable ? POLLIN : POLLOUT, deadline).ok());
    }
  }
  EXPECT_EQ(t.HasBuffered(), tls);
  while (got.size() < 7) {
    auto n = t.TryRead(buffer, sizeof(buffer), &wait);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    got.append(buffer, *n);
    if (*n == 0) {
      ASSERT_TRUE(WaitReady(t.fd(), wait == IoWait::kReadable ? POLLIN : POLLOUT, deadline).ok());
    }
  }
  EXPECT_EQ(got, "+PONG\r\n");
  EXPECT_FALSE(t.HasBuffered());
}

TEST(NonBlockingTransport, MovesBytesWithoutWaitingAndTellsWhatTlsHolds) {
  RedisServer plain;
  ExpectNonBlockingRoundTrip(OptionsFor(plain), false);
  RedisServer tls(RedisServerOptions{.tls = true});
  ExpectNonBlockingRoundTrip(tls.ClientOptions(), true);
}

TEST(NonBlockingTransport, APeerThatClosesIsAnIoError) {
  RedisServer server;
  auto options = OptionsFor(server);
  auto transport = ConnectTransport(options.endpoint, options.tls, Millis(5000));
  ASSERT_TRUE(transport.ok());
  server.Kill();
  char buffer[16];
  IoWait wait = IoWait::kWritable;
  StatusOr<size_t> n = size_t{0};
  const SteadyTime deadline = SteadyClock::now() + Millis(10000);
  while (n.ok() && *n == 0 && SteadyClock::now() < deadline) {
    (void)WaitReady((*transport)->fd(), POLLIN, deadline);
    n = (*transport)->TryRead(buffer, sizeof(buffer), &wait);
  }
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kIo);
}

}  // namespace
}  // namespace streamcar::redis
