// The event-loop handler client (sidecar/delivery/http_client.h) against raw-socket servers
// written in the test, so that a handler can misbehave on purpose: answer twice, answer early,
// answer when nobody asked, break framing, trickle, reset. The cases of http_client_test.cc (the
// blocking client) under the same names and assertions, driven through a helper that runs the
// loop until the callback ran, plus what only a pool on a loop can get wrong: several requests
// in flight on separate connections, a timeout that must close only its own connection, a
// connection that is never accepted, the health probe.
//
// Every callback is checked to run exactly once and never inside Send.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/common/event_loop.h"
#include "sidecar/delivery/http_client.h"
#include "tests/integration/raw_http_server.h"
#include "tests/support/certificates.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::delivery {
namespace {

using Kind = HandlerResponse::Kind;
using std::chrono::milliseconds;
using testing::Peer;
using testing::RawServer;

std::string Answer(int status, std::string_view body = "", std::string_view extra = "") {
  return "HTTP/1.1 " + std::to_string(status) +
         " X\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + std::string(extra) +
         "\r\n" + std::string(body);
}

HttpRequest Request(std::string body = "{}") {
  HttpRequest request;
  request.content_type = "application/json";
  request.body = std::move(body);
  request.headers = {{"Streamcar-Id", "1-0"}};
  return request;
}

// Answers every request on every connection with `status`, until the client closes.
RawServer::Script Always(int status) {
  return [status](Peer& peer, int) {
    while (!peer.ReadRequest().empty()) {
      if (!peer.Send(Answer(status, "ok"))) return;
    }
  };
}

bool WaitUntil(const std::function<bool()>& condition) {
  return testing::Eventually(condition, milliseconds(10000));
}

// The client on a loop that this (the test's) thread runs. Post and Get block the test until the
// answer: the loop runs until the callback did, then once more to catch a second call.
class AsyncClient {
 public:
  AsyncClient(const std::string& url, Millis timeout, size_t concurrency = 1,
              std::optional<std::string> health_url = std::nullopt, Resolver resolver = ResolveHost)
      : timeout_(timeout) {
    auto loop = EventLoop::Create(SystemClock::Instance());
    EXPECT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = std::move(*loop);
    std::optional<HttpTarget> health = SplitUrl(url);
    if (health_url) health = SplitUrl(*health_url);
    auto client =
        Http1Client::Create(*loop_, SplitUrl(url), health, concurrency, std::move(resolver));
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }
  ~AsyncClient() { client_.reset(); }  // before the loop

  // Sends without waiting; *out is set when the answer is in (see Done()).
  bool Start(HttpRequest request, std::optional<HandlerResponse>* out) {
    in_send_ = true;
    const bool accepted =
        client_->Send(std::move(request), timeout_, [this, out](HandlerResponse response) {
          EXPECT_FALSE(in_send_) << "done ran inside Send";
          EXPECT_FALSE(out->has_value()) << "done ran twice";
          *out = std::move(response);
        });
    in_send_ = false;
    return accepted;
  }

  HandlerResponse Post(HttpRequest request) {
    std::optional<HandlerResponse> response;
    EXPECT_TRUE(Start(std::move(request), &response)) << "every connection busy";
    RunUntil([&] { return response.has_value(); });
    loop_->RunOnce(Millis(0));
    return response.value_or(HandlerResponse{Kind::kError, 0, "", "", "no callback"});
  }

  bool Get() {
    std::optional<bool> healthy;
    in_send_ = true;
    client_->Probe(timeout_, [&](bool up) {
      EXPECT_FALSE(in_send_) << "done ran inside Probe";
      EXPECT_FALSE(healthy.has_value()) << "done ran twice";
      healthy = up;
    });
    in_send_ = false;
    RunUntil([&] { return healthy.has_value(); });
    loop_->RunOnce(Millis(0));
    return healthy.value_or(false);
  }

  // Runs the loop until `condition` holds (at most 20 s).
  void RunUntil(const std::function<bool()>& condition) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!condition() && std::chrono::steady_clock::now() < give_up) {
      loop_->RunOnce(Millis(50));
    }
    EXPECT_TRUE(condition()) << "the callback never ran";
  }

  // Does whatever is ready now, without waiting.
  void RunOnce() { loop_->RunOnce(Millis(0)); }
  EventLoop& loop() { return *loop_; }

  int connections_opened() const { return client_->connections_opened(); }
  Http1Client& client() { return *client_; }

 private:
  Millis timeout_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Http1Client> client_;
  bool in_send_ = false;
};

TEST(HttpClientAsyncTest, KeepAliveServesAHundredRequestsOnOneConnection) {
  RawServer server(Always(200));
  AsyncClient client(server.url("/orders"), milliseconds(5000));
  for (int i = 0; i < 100; ++i) {
    auto response = client.Post(Request());
    ASSERT_EQ(response.kind, Kind::kAnswered) << i << ": " << response.error;
    ASSERT_EQ(response.status, 200);
    ASSERT_EQ(response.body, "ok");
  }
  EXPECT_EQ(client.connections_opened(), 1);
  EXPECT_EQ(server.accepted(), 1);
}

TEST(HttpClientAsyncTest, TheRequestOnTheWireIsExact) {
  std::string seen;
  std::mutex mu;
  RawServer server([&](Peer& peer, int) {
    std::string request = peer.ReadRequest();
    {
      std::lock_guard lock(mu);
      seen = request;
    }
    peer.Send(Answer(204));
  });
  AsyncClient client(server.url("/in put?q=1#frag"), milliseconds(5000));
  auto response = client.Post(Request(R"({"a":1})"));
  ASSERT_EQ(response.kind, Kind::kAnswered) << response.error;
  EXPECT_EQ(response.status, 204);
  std::lock_guard lock(mu);
  EXPECT_EQ(seen,
            "POST /in%20put?q=1 HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(server.port()) +
                "\r\nContent-Type: application/json\r\nUser-Agent: streamcar/0.1.0\r\n"
                "Content-Length: 7\r\nStreamcar-Id: 1-0\r\n\r\n{\"a\":1}");
}

// The loss of issue 10: a handler answers 503 on its first connection and then, with no request
// outstanding, a second, unsolicited 200 (`extra_sent` once it has); every later connection
// answers 202. The 200 must not become the answer of the next request.
RawServer::Script AnswersTwiceOnItsFirstConnection(std::atomic<bool>& extra_sent) {
  return [&extra_sent](Peer& peer, int index) {
    if (index == 0) {
      if (peer.ReadRequest().empty()) return;
      peer.Send(Answer(503, "no"));
      std::this_thread::sleep_for(milliseconds(50));
      peer.Send(Answer(200, "smuggled"));
      extra_sent = true;
      peer.ReadRequest();  // whatever comes next stays unanswered here
      return;
    }
    Always(202)(peer, index);
  };
}

TEST(HttpClientAsyncTest, UnsolicitedAnswerOnAnIdleConnectionIsNeverTakenForTheNext) {
  std::atomic<bool> extra_sent{false};
  RawServer server(AnswersTwiceOnItsFirstConnection(extra_sent));
  AsyncClient client(server.url(), milliseconds(5000));
  auto first = client.Post(Request());
  ASSERT_EQ(first.kind, Kind::kAnswered) << first.error;
  EXPECT_EQ(first.status, 503);
  ASSERT_TRUE(WaitUntil([&] { return extra_sent.load(); }));
  auto second = client.Post(Request());
  ASSERT_EQ(second.kind, Kind::kAnswered) << second.error;
  EXPECT_EQ(second.status, 202) << "the smuggled 200 was taken as the answer";
  EXPECT_EQ(client.connections_opened(), 2);
}

// The same inside a loop round, where a plain socket's idle watch (not a peek) says whether the
// connection is clean: the smuggled answer came before the round's poll, so it is seen.
TEST(HttpClientAsyncTest, UnsolicitedAnswerIsNeverTakenByASendInsideALoopRound) {
  std::atomic<bool> extra_sent{false};
  RawServer server(AnswersTwiceOnItsFirstConnection(extra_sent));
  AsyncClient client(server.url(), milliseconds(5000));
  ASSERT_EQ(client.Post(Request()).status, 503);
  ASSERT_TRUE(WaitUntil([&] { return extra_sent.load(); }));
  std::optional<HandlerResponse> second;
  client.loop().Post([&] { client.Start(Request(), &second); });
  client.RunUntil([&] { return second.has_value(); });
  ASSERT_EQ(second->kind, Kind::kAnswered) << second->error;
  EXPECT_EQ(second->status, 202) << "the smuggled 200 was taken as the answer";
  EXPECT_EQ(client.connections_opened(), 2);
}

// A handler that ends the connection right after an answer that did not say so: the end came
// with the answer, in the same poll, and the request sent from inside `done` (the same round)
// goes on a new connection instead of failing on the ended one.
TEST(HttpClientAsyncTest, AnAnswerThatArrivesWithTheEndIsNotReusedInsideItsRound) {
  std::atomic<bool> ended{false};
  RawServer server([&](Peer& peer, int index) {
    if (index == 0) {
      if (peer.ReadRequest().empty() || !peer.Send(Answer(200, "first"))) return;
      if (peer.ReadRequest().empty()) return;
      peer.Send(Answer(200, "second"));
      ::shutdown(peer.fd, SHUT_WR);
      ended = true;
      peer.ReadRequest();  // a request sent on the ended connection is never answered
      return;
    }
    Always(202)(peer, index);
  });
  AsyncClient client(server.url(), milliseconds(5000));
  ASSERT_EQ(client.Post(Request()).status, 200);
  std::optional<HandlerResponse> second;
  std::optional<HandlerResponse> third;
  // Written at once on the kept connection; the loop does not run until the end has arrived.
  ASSERT_TRUE(client.client().Send(Request(), milliseconds(5000), [&](HandlerResponse response) {
    second = std::move(response);
    client.Start(Request(), &third);
  }));
  ASSERT_TRUE(WaitUntil([&] { return ended.load(); }));
  client.RunUntil([&] { return third.has_value(); });
  ASSERT_EQ(second->kind, Kind::kAnswered) << second->error;
  EXPECT_EQ(second->status, 200);
  ASSERT_EQ(third->kind, Kind::kAnswered) << third->error;
  EXPECT_EQ(third->status, 202);
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST(HttpClientAsyncTest, TwoAnswersToOneRequestFailTheRequest) {
  RawServer server([](Peer& peer, int index) {
    if (index == 0) {
      if (peer.ReadRequest().empty()) return;
      peer.Send(Answer(503, "no") + Answer(200, "smuggled"));
      peer.ReadRequest();
      return;
    }
    Always(200)(peer, index);
  });
  AsyncClient client(server.url(), milliseconds(5000));
  auto first = client.Post(Request());
  EXPECT_EQ(first.kind, Kind::kError);
  EXPECT_NE(first.error.find("after its answer"), std::string::npos) << first.error;
  auto second = client.Post(Request());
  ASSERT_EQ(second.kind, Kind::kAnswered) << second.error;
  EXPECT_EQ(second.body, "ok");
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST(HttpClientAsyncTest, AnAnswerBeforeTheRequestWasFullySentFailsIt) {
  std::atomic<bool> release{false};
  RawServer server(
      [&](Peer& peer, int) {
        if (peer.ReadHead().empty()) return;
        peer.Send(Answer(200, "early"));
        // Read nothing more: the client's write of the large body stays blocked.
        while (!release) std::this_thread::sleep_for(milliseconds(10));
      },
      nullptr, /*receive_buffer=*/4096);
  AsyncClient client(server.url(), milliseconds(5000));
  const auto response = client.Post(Request(std::string(8 << 20, 'x')));
  EXPECT_EQ(response.kind, Kind::kError) << response.status;
  EXPECT_NE(response.error.find("before the request was fully sent"), std::string::npos)
      << response.error;
  release = true;
}

// A request that would break HTTP framing is never sent; its failure, found inside Send, still
// reaches the caller from the loop (the helper checks that `done` does not run inside Send).
TEST(HttpClientAsyncTest, ARequestThatWouldBreakFramingFailsFromTheLoop) {
  RawServer server(Always(200));
  AsyncClient client(server.url(), milliseconds(5000));
  HttpRequest smuggling = Request();
  smuggling.headers.emplace_back("X-Note", "a\r\nContent-Length: 0");
  auto response = client.Post(std::move(smuggling));
  EXPECT_EQ(response.kind, Kind::kError);
  EXPECT_NE(response.error.find("request not sent"), std::string::npos) << response.error;
  EXPECT_EQ(client.connections_opened(), 0);
  EXPECT_EQ(client.Post(Request()).status, 200);
}

TEST(HttpClientAsyncTest, GarbageStatusLineFailsTheRequestAndTheConnection) {
  RawServer server([](Peer& peer, int index) {
    if (index == 0) {
      if (peer.ReadRequest().empty()) return;
      peer.Send("HTXP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
      peer.ReadRequest();
      return;
    }
    Always(200)(peer, index);
  });
  AsyncClient client(server.url(), milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kError);
  EXPECT_NE(response.error.find("malformed"), std::string::npos) << response.error;
  EXPECT_EQ(client.Post(Request()).status, 200);
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST(HttpClientAsyncTest, ContentLengthWithTransferEncodingIsRefused) {
  RawServer server([](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    peer.Send(
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
        "0\r\n\r\n");
    peer.ReadRequest();
  });
  AsyncClient client(server.url(), milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kError);
  EXPECT_NE(response.error.find("Transfer-Encoding"), std::string::npos) << response.error;
}

TEST(HttpClientAsyncTest, ChunkedAndCloseDelimitedAnswersAreRead) {
  RawServer server([](Peer& peer, int index) {
    if (peer.ReadRequest().empty()) return;
    if (index == 0) {
      peer.Send(
          "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
          "chunked\r\n\r\n4\r\n{\"st\r\n2\r\n\"}\r\n0\r\n\r\n");
      peer.ReadRequest();
    } else {
      peer.Send("HTTP/1.1 500 Oops\r\n\r\nall until close");
    }
  });
  AsyncClient client(server.url(), milliseconds(5000));
  auto chunked = client.Post(Request());
  ASSERT_EQ(chunked.kind, Kind::kAnswered) << chunked.error;
  EXPECT_EQ(chunked.body, "{\"st\"}");
  // Forces a new connection for the close-delimited one.
  RawServer other([](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    peer.Send("HTTP/1.1 500 Oops\r\n\r\nall until close");
  });
  AsyncClient client2(other.url(), milliseconds(5000));
  auto closed = client2.Post(Request());
  ASSERT_EQ(closed.kind, Kind::kAnswered) << closed.error;
  EXPECT_EQ(closed.status, 500);
  EXPECT_EQ(closed.body, "all until close");
}

TEST(HttpClientAsyncTest, TricklingAnswerTimesOutAtTheTotalDeadline) {
  RawServer server([](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    const std::string answer =
        "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n" + std::string(50, 'x');
    // One byte every 100 ms: each read is quick, the whole answer takes about 9 s.
    for (char c : answer) {
      if (!peer.Send(std::string(1, c))) return;
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  AsyncClient client(server.url(), milliseconds(1000));
  const auto started = std::chrono::steady_clock::now();
  auto response = client.Post(Request());
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(response.kind, Kind::kTimeout) << response.status << " " << response.error;
  EXPECT_GE(took, milliseconds(1000));
  EXPECT_LT(took, milliseconds(1500));
}

TEST(HttpClientAsyncTest, ResetAfterTheRequestIsAnError) {
  RawServer server([](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    linger hard{1, 0};
    ::setsockopt(peer.fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
  });
  AsyncClient client(server.url(), milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kError) << response.error;
}

TEST(HttpClientAsyncTest, CloseWithoutAnAnswerIsAnError) {
  RawServer server([](Peer& peer, int) { peer.ReadRequest(); });
  AsyncClient client(server.url(), milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kError) << response.error;
  EXPECT_NE(response.error.find("closed"), std::string::npos) << response.error;
}

TEST(HttpClientAsyncTest, RefusedConnectionIsRefused) {
  int port;
  {
    RawServer gone(Always(200));
    port = gone.port();
  }
  AsyncClient client("http://127.0.0.1:" + std::to_string(port) + "/", milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kRefused) << response.error;
  EXPECT_NE(response.error.find("http://127.0.0.1:" + std::to_string(port)), std::string::npos)
      << response.error;
  EXPECT_FALSE(client.Get());
}

// A resolver standing in for a slow DNS: the name resolves to 127.0.0.1 after `delay`; counts
// its calls.
struct SlowResolver {
  Millis delay;
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  Resolver Get() const {
    return [delay = delay, calls = calls](const std::string&, int port, const std::string& origin) {
      ++*calls;
      std::this_thread::sleep_for(delay);
      return ResolveHost("127.0.0.1", port, origin);
    };
  }
};

// getaddrinfo blocks; the loop must not: its timers fire while a name resolves, and the
// requests that need a connection meanwhile share one resolution.
TEST(HttpClientAsyncTest, ANameIsResolvedOffTheLoop) {
  RawServer server(Always(200));
  SlowResolver resolver{Millis(600)};
  AsyncClient client("http://handler.test:" + std::to_string(server.port()) + "/",
                     milliseconds(5000), /*concurrency=*/2, std::nullopt, resolver.Get());
  std::optional<HandlerResponse> first;
  std::optional<HandlerResponse> second;
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(client.Start(Request(), &first));
  ASSERT_TRUE(client.Start(Request(), &second));
  std::optional<std::chrono::steady_clock::duration> timer_fired;
  auto timer =
      client.loop().CreateTimer([&] { timer_fired = std::chrono::steady_clock::now() - started; });
  timer->ArmIn(Millis(50));
  client.RunUntil([&] { return first.has_value() && second.has_value(); });
  ASSERT_TRUE(timer_fired.has_value());
  EXPECT_LT(*timer_fired, milliseconds(500)) << "the loop waited for the resolver";
  EXPECT_EQ(first->kind, Kind::kAnswered) << first->error;
  EXPECT_EQ(second->kind, Kind::kAnswered) << second->error;
  EXPECT_EQ(resolver.calls->load(), 1);
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(600));
}

TEST(HttpClientAsyncTest, AFailedResolutionRefusesEveryWaitingRequest) {
  Resolver failing = [](const std::string& host, int, const std::string& origin) {
    return StatusOr<std::vector<ResolvedAddress>>(ResolveFailure(host, origin, "no such host"));
  };
  AsyncClient client("http://handler.test:8080/", milliseconds(5000), 2, std::nullopt, failing);
  std::optional<HandlerResponse> first;
  std::optional<HandlerResponse> second;
  ASSERT_TRUE(client.Start(Request(), &first));
  ASSERT_TRUE(client.Start(Request(), &second));
  client.RunUntil([&] { return first.has_value() && second.has_value(); });
  for (const auto& response : {*first, *second}) {
    EXPECT_EQ(response.kind, Kind::kRefused) << response.error;
    EXPECT_EQ(response.error,
              "cannot resolve handler.test (http://handler.test:8080): no such host");
  }
}

// The system resolver on a name that cannot exist (RFC 6761 .invalid).
TEST(HttpClientAsyncTest, AnUnknownNameIsRefusedClearly) {
  AsyncClient client("http://no-such-host.invalid:8080/", milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kRefused) << response.error;
  EXPECT_NE(response.error.find("cannot resolve no-such-host.invalid"), std::string::npos)
      << response.error;
}

// Resolving counts against the 2 s connect cap: a name that takes longer is refused.
TEST(HttpClientAsyncTest, AResolutionPastTheConnectCapIsRefused) {
  RawServer server(Always(200));
  SlowResolver resolver{Millis(3000)};
  AsyncClient client("http://handler.test:" + std::to_string(server.port()) + "/",
                     milliseconds(10000), 1, std::nullopt, resolver.Get());
  const auto started = std::chrono::steady_clock::now();
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kRefused) << response.error;
  EXPECT_NE(response.error.find("cannot resolve handler.test"), std::string::npos)
      << response.error;
  EXPECT_NE(response.error.find("timed out"), std::string::npos) << response.error;
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(2900));
}

TEST(HttpClientAsyncTest, ConnectionCloseIsHonoured) {
  RawServer server([](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    peer.Send(Answer(200, "ok", "Connection: close\r\n"));
    // Keeps the socket open: the client must not reuse it anyway.
    peer.ReadRequest();
  });
  AsyncClient client(server.url(), milliseconds(5000));
  for (int i = 0; i < 3; ++i) {
    auto response = client.Post(Request());
    ASSERT_EQ(response.kind, Kind::kAnswered) << response.error;
  }
  EXPECT_EQ(client.connections_opened(), 3);
}

TEST(HttpClientAsyncTest, IdleConnectionClosedByTheHandlerIsReplaced) {
  std::atomic<bool> closed{false};
  RawServer server([&](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    peer.Send(Answer(200, "ok"));
    ::shutdown(peer.fd, SHUT_RDWR);  // an idle timeout on the handler's side
    closed = true;
  });
  AsyncClient client(server.url(), milliseconds(5000));
  ASSERT_EQ(client.Post(Request()).status, 200);
  ASSERT_TRUE(WaitUntil([&] { return closed.load(); }));
  auto response = client.Post(Request());
  ASSERT_EQ(response.kind, Kind::kAnswered) << response.error;
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST(HttpClientAsyncTest, GetIsTrueOnlyFor2xx) {
  RawServer up(Always(200));
  RawServer down(Always(503));
  EXPECT_TRUE(AsyncClient(up.url("/healthz"), milliseconds(2000)).Get());
  EXPECT_FALSE(AsyncClient(down.url("/healthz"), milliseconds(2000)).Get());
}

// New with the pool: `concurrency` requests are in flight at once, each on its own connection,
// and the connections are kept for the next ones.
TEST(HttpClientAsyncTest, ConcurrencyRequestsUseSeparateConnections) {
  constexpr int kConcurrency = 4;
  std::atomic<int> arrived{0};
  RawServer server([&](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    // Nobody is answered before every request has arrived: they must all be in flight at once.
    ++arrived;
    if (!WaitUntil([&] { return arrived.load() >= kConcurrency; })) return;
    if (!peer.Send(Answer(200, "ok"))) return;
    Always(200)(peer, 0);
  });
  AsyncClient client(server.url(), milliseconds(8000), kConcurrency);
  EXPECT_EQ(client.client().free_slots(), size_t{kConcurrency});
  for (int round = 0; round < 2; ++round) {
    std::vector<std::optional<HandlerResponse>> responses(kConcurrency);
    for (auto& response : responses) ASSERT_TRUE(client.Start(Request(), &response));
    EXPECT_EQ(client.client().free_slots(), 0u);
    std::optional<HandlerResponse> refused;
    EXPECT_FALSE(client.Start(Request(), &refused)) << "a fifth request while four are in flight";
    client.RunUntil([&] {
      for (const auto& response : responses) {
        if (!response.has_value()) return false;
      }
      return true;
    });
    for (const auto& response : responses) {
      ASSERT_TRUE(response.has_value());
      EXPECT_EQ(response->kind, Kind::kAnswered) << round << ": " << response->error;
      EXPECT_EQ(response->status, 200);
    }
    EXPECT_FALSE(refused.has_value()) << "a refused Send's callback ran";
    EXPECT_EQ(client.client().free_slots(), size_t{kConcurrency});
  }
  EXPECT_EQ(client.connections_opened(), kConcurrency);
  EXPECT_EQ(server.accepted(), kConcurrency);
}

// A request that times out closes its own connection (its answer could still come) and no other
// (the timeout leaves a loaded machine room to answer the other one):
// the request answered meanwhile keeps its connection for the next one.
TEST(HttpClientAsyncTest, ATimeoutClosesOnlyItsConnection) {
  std::atomic<bool> slow_closed{false};
  RawServer server([&](Peer& peer, int) {
    while (true) {
      const std::string request = peer.ReadRequest();
      if (request.empty()) return;
      if (request.find("slow") != std::string::npos) {
        // Never answered; the client's close ends the wait.
        if (peer.ReadRequest().empty()) slow_closed = true;
        return;
      }
      if (!peer.Send(Answer(200, "ok"))) return;
    }
  });
  AsyncClient client(server.url(), milliseconds(1500), /*concurrency=*/2);
  std::optional<HandlerResponse> slow;
  std::optional<HandlerResponse> fast;
  ASSERT_TRUE(client.Start(Request(R"({"slow":1})"), &slow));
  ASSERT_TRUE(client.Start(Request(R"({"fast":1})"), &fast));
  client.RunUntil([&] { return slow.has_value() && fast.has_value(); });
  ASSERT_TRUE(fast.has_value() && slow.has_value());
  EXPECT_EQ(fast->kind, Kind::kAnswered) << fast->error;
  EXPECT_EQ(slow->kind, Kind::kTimeout) << slow->error;
  EXPECT_NE(slow->error.find("no answer within 1500ms"), std::string::npos) << slow->error;
  EXPECT_TRUE(WaitUntil([&] { return slow_closed.load(); })) << "the timed-out connection stayed";
  auto again = client.Post(Request(R"({"fast":2})"));
  EXPECT_EQ(again.kind, Kind::kAnswered) << again.error;
  EXPECT_EQ(client.connections_opened(), 2);
  EXPECT_EQ(server.accepted(), 2) << "the answered request's connection was not kept";
}

// A handler that never accepts: the connection is not established within 2 s (the connect cap),
// which is kRefused (not an attempt), not a timeout of the request.
TEST(HttpClientAsyncTest, RefusedWhileConnectingIsRefused) {
  // A listening socket that never accepts, with its accept queue filled: further SYNs are dropped,
  // so a connection to it stays in progress.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  socklen_t length = sizeof(address);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  std::vector<int> fillers;
  for (int i = 0; i < 3; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    fillers.push_back(fd);
  }
  pollfd first{fillers[0], POLLOUT, 0};
  ASSERT_EQ(::poll(&first, 1, 5000), 1) << "the first filler never connected";

  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/";
  AsyncClient client(url, milliseconds(5000));
  const auto started = std::chrono::steady_clock::now();
  auto response = client.Post(Request());
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(response.kind, Kind::kRefused) << response.error;
  EXPECT_NE(response.error.find("cannot connect to " + url.substr(0, url.size() - 1)),
            std::string::npos)
      << response.error;
  EXPECT_GE(took, milliseconds(2000));
  EXPECT_LT(took, milliseconds(4000)) << "the connect cap is 2 s, not the request's 5 s";
  EXPECT_EQ(client.connections_opened(), 0);
  for (int fd : fillers) ::close(fd);
  ::close(listener);
}

// The probe GETs the health URL, not the handler's, and takes no request slot.
TEST(HttpClientAsyncTest, ProbeIsTrueOnlyFor2xx) {
  std::atomic<int> probed{0};
  RawServer up([&](Peer& peer, int) {
    while (true) {
      const std::string request = peer.ReadRequest();
      if (request.empty()) return;
      if (request.starts_with("GET /healthz HTTP/1.1\r\n")) ++probed;
      if (!peer.Send(Answer(200, "ok"))) return;
    }
  });
  RawServer down(Always(503));
  RawServer teapot(Always(418));
  int gone_port;
  {
    RawServer gone(Always(200));
    gone_port = gone.port();
  }
  AsyncClient healthy(down.url("/in"), milliseconds(2000), 1, up.url("/healthz"));
  EXPECT_TRUE(healthy.Get());
  EXPECT_TRUE(healthy.Get()) << "the probe connection is kept alive";
  EXPECT_EQ(probed.load(), 2);
  EXPECT_EQ(up.accepted(), 1);
  EXPECT_EQ(healthy.client().free_slots(), 1u);
  EXPECT_FALSE(AsyncClient(up.url("/in"), milliseconds(2000), 1, down.url("/healthz")).Get());
  EXPECT_FALSE(AsyncClient(up.url("/in"), milliseconds(2000), 1, teapot.url("/healthz")).Get());
  EXPECT_FALSE(AsyncClient(up.url("/in"), milliseconds(2000), 1,
                           "http://127.0.0.1:" + std::to_string(gone_port) + "/healthz")
                   .Get());
}

// The delivery pump sends the next request from inside the callback of the last one: the
// connection that just answered is already back in the pool and serves it.
TEST(HttpClientAsyncTest, ASendFromInsideDoneReusesTheConnection) {
  RawServer server(Always(200));
  AsyncClient client(server.url(), milliseconds(5000));
  int answered = 0;
  bool failed = false;
  std::function<void(HandlerResponse)> next = [&](const HandlerResponse& response) {
    if (response.kind != Kind::kAnswered || response.status != 200) failed = true;
    if (++answered < 10 && !client.client().Send(Request(), milliseconds(5000), next)) {
      failed = true;
    }
  };
  ASSERT_TRUE(client.client().Send(Request(), milliseconds(5000), next));
  client.RunUntil([&] { return answered == 10 || failed; });
  EXPECT_FALSE(failed);
  EXPECT_EQ(answered, 10);
  EXPECT_EQ(client.connections_opened(), 1);
  EXPECT_EQ(server.accepted(), 1);
}

// The pool's bookkeeping under load: every slot kept busy for 800 requests, each refilled from
// the callback of the one before; every request comes back once, on at most `concurrency`
// connections.
TEST(HttpClientAsyncTest, AFullPoolServesEveryRequestOnce) {
  constexpr size_t kConcurrency = 8;
  constexpr int kRequests = 800;
  RawServer server(Always(200));
  AsyncClient client(server.url(), milliseconds(10000), kConcurrency);
  int sent = 0;
  int answered = 0;
  int failed = 0;
  std::function<void(HandlerResponse)> done = [&](const HandlerResponse& response) {
    ++answered;
    if (response.kind != Kind::kAnswered || response.status != 200) ++failed;
    if (sent < kRequests && client.client().Send(Request(), milliseconds(10000), done)) ++sent;
  };
  while (client.client().free_slots() > 0) {
    ASSERT_TRUE(client.client().Send(Request(), milliseconds(10000), done));
    ++sent;
  }
  EXPECT_EQ(sent, static_cast<int>(kConcurrency));
  client.RunUntil([&] { return answered == kRequests; });
  for (int i = 0; i < 5; ++i) client.RunOnce();
  EXPECT_EQ(sent, kRequests);
  EXPECT_EQ(answered, kRequests);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(client.client().free_slots(), kConcurrency);
  EXPECT_LE(client.connections_opened(), static_cast<int>(kConcurrency));
  EXPECT_EQ(server.accepted(), client.connections_opened());
}

// Past the drain deadline: Abandon closes the connections at once and no callback runs, neither
// of a request in flight nor of a failure already posted; the client can be used again after.
TEST(HttpClientAsyncTest, AbandonClosesEverythingAndRunsNoCallback) {
  std::atomic<int> closed{0};
  RawServer server([&](Peer& peer, int index) {
    if (index == 0) {
      // Never answers; the client's close ends the wait.
      if (peer.ReadRequest().empty() || peer.ReadRequest().empty()) ++closed;
      return;
    }
    Always(200)(peer, index);
  });
  AsyncClient client(server.url(), milliseconds(5000), /*concurrency=*/2);
  std::optional<HandlerResponse> in_flight;
  std::optional<HandlerResponse> posted;
  ASSERT_TRUE(client.Start(Request(), &in_flight));
  HttpRequest smuggling = Request();
  smuggling.headers.emplace_back("X-Note", "a\r\nb");
  ASSERT_TRUE(client.Start(std::move(smuggling), &posted));
  // The kernel completes the connection without the loop; the posted failure waits for the loop.
  ASSERT_TRUE(WaitUntil([&] { return server.accepted() == 1; }));
  client.client().Abandon();
  EXPECT_EQ(client.client().free_slots(), 2u);
  EXPECT_TRUE(WaitUntil([&] {
    client.RunOnce();
    return closed.load() == 1;
  })) << "the connection in flight was not closed";
  for (int i = 0; i < 5; ++i) client.RunOnce();
  EXPECT_FALSE(in_flight.has_value()) << "a callback ran after Abandon";
  EXPECT_FALSE(posted.has_value()) << "a posted failure ran after Abandon";
  auto after = client.Post(Request());
  EXPECT_EQ(after.kind, Kind::kAnswered) << after.error;
}

// https:// handlers: verified against the system trust store (here SSL_CERT_FILE, which OpenSSL
// reads as the system store), kept alive like plain connections.
class HttpsClientAsyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("streamcar-https-async-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    certs_ = testing::MakeTestCertificates(dir_.string());
    ctx_ = SSL_CTX_new(TLS_server_method());
    ASSERT_EQ(SSL_CTX_use_certificate_chain_file(ctx_, certs_.server_cert.c_str()), 1);
    ASSERT_EQ(SSL_CTX_use_PrivateKey_file(ctx_, certs_.server_key.c_str(), SSL_FILETYPE_PEM), 1);
    const char* old = std::getenv("SSL_CERT_FILE");
    if (old != nullptr) saved_ = old;
  }
  void TearDown() override {
    if (saved_.empty()) {
      ::unsetenv("SSL_CERT_FILE");
    } else {
      ::setenv("SSL_CERT_FILE", saved_.c_str(), 1);
    }
    SSL_CTX_free(ctx_);
    std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
  testing::TestCertificates certs_;
  SSL_CTX* ctx_ = nullptr;
  std::string saved_;
};

TEST_F(HttpsClientAsyncTest, TrustedHandlerIsServedOverOneConnection) {
  ::setenv("SSL_CERT_FILE", certs_.ca_cert.c_str(), 1);
  RawServer server(Always(200), ctx_);
  AsyncClient client(server.url(), milliseconds(5000));
  for (int i = 0; i < 10; ++i) {
    auto response = client.Post(Request(std::string(100000, 'x')));
    ASSERT_EQ(response.kind, Kind::kAnswered) << i << ": " << response.error;
    ASSERT_EQ(response.status, 200);
  }
  EXPECT_EQ(client.connections_opened(), 1);
  AsyncClient by_name("https://localhost:" + std::to_string(server.port()) + "/",
                      milliseconds(5000));
  EXPECT_EQ(by_name.Post(Request()).status, 200);
}

TEST_F(HttpsClientAsyncTest, UntrustedHandlerIsRefusedClearly) {
  ::setenv("SSL_CERT_FILE", certs_.other_ca_cert.c_str(), 1);
  RawServer server(Always(200), ctx_);
  AsyncClient client(server.url(), milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kRefused);
  EXPECT_NE(response.error.find("not trusted"), std::string::npos) << response.error;
  EXPECT_EQ(response.error.find("redis"), std::string::npos) << response.error;
}

TEST_F(HttpsClientAsyncTest, SmuggledAnswerOverTlsIsNeverTakenForTheNext) {
  ::setenv("SSL_CERT_FILE", certs_.ca_cert.c_str(), 1);
  std::atomic<bool> extra_sent{false};
  RawServer server(
      [&](Peer& peer, int index) {
        if (index == 0) {
          if (peer.ReadRequest().empty()) return;
          peer.Send(Answer(503));
          std::this_thread::sleep_for(milliseconds(50));
          peer.Send(Answer(200, "smuggled"));
          extra_sent = true;
          peer.ReadRequest();
          return;
        }
        Always(202)(peer, index);
      },
      ctx_);
  AsyncClient client(server.url(), milliseconds(5000));
  EXPECT_EQ(client.Post(Request()).status, 503);
  ASSERT_TRUE(WaitUntil([&] { return extra_sent.load(); }));
  EXPECT_EQ(client.Post(Request()).status, 202);
}

// A TLS 1.3 session ticket is a TLS record on the socket, but not an answer: one that arrives
// while the connection is idle must not be taken for unsolicited bytes (which would close it).
TEST_F(HttpsClientAsyncTest, ASessionTicketOnAnIdleConnectionIsNotUnsolicited) {
  ::setenv("SSL_CERT_FILE", certs_.ca_cert.c_str(), 1);
  std::atomic<bool> ticket_sent{false};
  RawServer server(
      [&](Peer& peer, int index) {
        if (peer.ReadRequest().empty()) return;
        if (!peer.Send(Answer(200, "ok"))) return;
        // With no request outstanding: a new ticket, sent at once.
        SSL* ssl = dynamic_cast<testing::TlsPeer&>(peer).ssl();
        if (SSL_new_session_ticket(ssl) == 1 && SSL_do_handshake(ssl) == 1) ticket_sent = true;
        Always(200)(peer, index);
      },
      ctx_);
  AsyncClient client(server.url(), milliseconds(5000));
  ASSERT_EQ(client.Post(Request()).status, 200);
  ASSERT_TRUE(WaitUntil([&] { return ticket_sent.load(); }));
  // The loop sees the ticket on the idle connection.
  for (int i = 0; i < 5; ++i) client.RunOnce();
  auto response = client.Post(Request());
  ASSERT_EQ(response.kind, Kind::kAnswered) << response.error;
  EXPECT_EQ(client.connections_opened(), 1) << "the ticket closed the idle connection";
  EXPECT_EQ(server.accepted(), 1);
}

}  // namespace
}  // namespace streamcar::delivery
