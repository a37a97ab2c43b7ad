// The inbound HTTP/1.1 server (http/server.h) on a loop this test drives by hand, with a manual
// clock for its deadlines and real loopback sockets for its clients: keep-alive and pipelining,
// answers given later from another thread, event streams, the request, idle and write deadlines,
// and the connection cap's eviction order; and the worker pool services answer from.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/event_loop.h"
#include "sidecar/common/listen_socket.h"
#include "sidecar/http/server.h"
#include "sidecar/http/worker_pool.h"

namespace streamcar::http {
namespace {

// Answers GET /now/... at once with the path, holds /later/... until the test answers, streams
// /stream, vouches for requests with "Authorization: yes", refuses DELETE from the head.
class TestService final : public Service {
 public:
  Screening Screen(const Request& head) override {
    Screening screening;
    const std::string* auth = head.Header("authorization");
    screening.authenticated = auth != nullptr && *auth == "yes";
    if (head.method == "DELETE") {
      Response refused;
      refused.status = 405;
      refused.body = "no";
      screening.answer = refused;
    }
    return screening;
  }
  void Handle(Request request, Responder responder) override {
    ++handled;
    last_body = request.body;
    if (request.path.starts_with("/later")) {
      held.push_back(responder);
    } else if (request.path == "/stream") {
      stream.emplace(responder);
    } else {
      Response response;
      response.body = request.path;
      responder.Respond(response);
    }
  }
  Response Refusal(int status, std::string_view message) const override {
    Response response;
    response.status = status;
    response.body = std::string(message);
    return response;
  }

  int handled = 0;
  std::string last_body;
  std::vector<Responder> held;
  std::optional<Responder> stream;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(ServerOptions{}); }
  void Start(ServerOptions options) {
    server_.reset();
    options_ = std::move(options);
    loop_ = std::move(*EventLoop::Create(clock_));
    server_ = std::make_unique<Server>(loop_.get(), options_, &service_);
    ASSERT_TRUE(server_->Listen("127.0.0.1:0", "test.listen").ok());
  }
  void TearDown() override {
    for (int fd : clients_) ::close(fd);
    server_.reset();
  }

  int Connect() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(server_->port()));
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    clients_.push_back(fd);
    Spin();
    return fd;
  }
  static void Send(int fd, const std::string& bytes) {
    ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Lets the server do everything it can now.
  void Spin() {
    for (int i = 0; i < 20; ++i) {
      while (loop_->RunOnce(Millis(2))) {
      }
    }
  }
  // What arrived on `fd` so far; *closed when the server closed it.
  static std::string Take(int fd, bool* closed = nullptr) {
    std::string got;
    char buffer[65536];
    while (true) {
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n > 0) {
        got.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (closed != nullptr) *closed = n == 0 || (n < 0 && errno != EAGAIN);
      return got;
    }
  }
  static int Count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  ManualClock clock_;
  ServerOptions options_;
  TestService service_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Server> server_;
  std::vector<int> clients_;
};

TEST_F(HttpServerTest, AnswersPipelinedRequestsInOrderOnOneConnection) {
  const int fd = Connect();
  Send(fd,
       "GET /now/1 HTTP/1.1\r\nHost: x\r\n\r\n"
       "GET /later/2 HTTP/1.1\r\nHost: x\r\n\r\n"
       "POST /now/3 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  Spin();
  std::string got = Take(fd);
  EXPECT_EQ(Count(got, "HTTP/1.1 200"), 1) << got;
  EXPECT_NE(got.find("/now/1"), std::string::npos);
  // The second is answered later, from another thread; the third waits behind it.
  ASSERT_EQ(service_.held.size(), 1u);
  EXPECT_EQ(service_.handled, 2);
  std::thread([responder = service_.held[0]] {
    Response late;
    late.body = "late";
    responder.Respond(late);
  }).join();
  Spin();
  bool closed = false;
  got = Take(fd, &closed);
  EXPECT_FALSE(closed);
  ASSERT_NE(got.find("late"), std::string::npos) << got;
  ASSERT_NE(got.find("/now/3"), std::string::npos) << got;
  EXPECT_LT(got.find("late"), got.find("/now/3"));
  EXPECT_EQ(service_.last_body, "abc");
}

TEST_F(HttpServerTest, ARequestThatArrivesWhileAnAnswerIsAwaitedIsAnsweredAfterIt) {
  const int fd = Connect();
  Send(fd, "GET /later/1 HTTP/1.1\r\nHost: x\r\n\r\n");
  Spin();
  ASSERT_EQ(service_.held.size(), 1u);
  // It stays in the socket until the first is answered; then the loop reports it and reads it
  // (the server does not read ahead after an answer: the loop tells it when bytes are there).
  Send(fd, "GET /now/2 HTTP/1.1\r\nHost: x\r\n\r\n");
  Spin();
  EXPECT_EQ(service_.handled, 1);
  Response late;
  late.body = "first";
  service_.held[0].Respond(late);
  Spin();
  bool closed = false;
  const std::string got = Take(fd, &closed);
  EXPECT_FALSE(closed);
  EXPECT_EQ(Count(got, "HTTP/1.1 200"), 2) << got;
  ASSERT_NE(got.find("first"), std::string::npos) << got;
  ASSERT_NE(got.find("/now/2"), std::string::npos) << got;
  EXPECT_LT(got.find("first"), got.find("/now/2"));
  // And the client's end of input after that still closes the connection.
  ::shutdown(fd, SHUT_WR);
  Spin();
  Take(fd, &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(server_->connections(), 0u);
}

// On the loop's own thread an answer is written at once (RespondOnLoop: the append group's
// answers); from anywhere else it is posted and written on the loop's next turn.
TEST_F(HttpServerTest, AnAnswerOnTheLoopIsWrittenAtOnceAndAPostedOneOnTheNextTurn) {
  const int a = Connect();
  const int b = Connect();
  Send(a, "GET /later/a HTTP/1.1\r\nHost: x\r\n\r\n");
  Send(b, "GET /later/b HTTP/1.1\r\nHost: x\r\n\r\n");
  Spin();
  ASSERT_EQ(service_.held.size(), 2u);
  Response answer;
  answer.body = "answer-a";
  service_.held[0].RespondOnLoop(answer);
  EXPECT_TRUE(Take(a).ends_with("answer-a")) << "written without another turn of the loop";
  answer.body = "answer-b";
  service_.held[1].Respond(answer);
  EXPECT_EQ(Take(b), "");
  Spin();
  EXPECT_TRUE(Take(b).ends_with("answer-b"));
  // An exchange already answered takes no second answer.
  answer.body = "again";
  service_.held[0].RespondOnLoop(answer);
  Spin();
  EXPECT_EQ(Take(a), "");
}

TEST_F(HttpServerTest, RefusesAMissingHostAndWhatFollowsIt) {
  const int fd = Connect();
  Send(fd, "GET /now/a HTTP/1.1\r\n\r\nGET /now/b HTTP/1.1\r\nHost: x\r\n\r\n");
  Spin();
  bool closed = false;
  const std::string got = Take(fd, &closed);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 400")) << got;
  EXPECT_EQ(got.find("/now/b"), std::string::npos) << got;
  EXPECT_TRUE(closed);
  EXPECT_EQ(service_.handled, 0);
}

TEST_F(HttpServerTest, RefusesARequestHiddenInTrailers) {
  const int fd = Connect();
  Send(fd,
       "POST /now/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
       "0\r\nX: a\n\nGET /now/hidden HTTP/1.1\r\nHost: x\r\n\r\n");
  Spin();
  bool closed = false;
  const std::string got = Take(fd, &closed);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 400")) << got;
  EXPECT_EQ(got.find("/now/hidden"), std::string::npos) << got;
  EXPECT_TRUE(closed);
  EXPECT_EQ(service_.handled, 0);
}

TEST_F(HttpServerTest, AScreenedAnswerWithABodyClosesTheConnection) {
  const int fd = Connect();
  Send(fd, "DELETE /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nGET /");
  Spin();
  bool closed = false;
  const std::string got = Take(fd, &closed);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 405")) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  EXPECT_TRUE(closed);
}

TEST_F(HttpServerTest, AWholeRequestMustArriveWithinTheRequestTimeout) {
  const int fd = Connect();
  Send(fd, "GET /now/a HTTP/1.1\r\n");
  Spin();
  // Trickling does not extend the deadline.
  for (int i = 0; i < 9; ++i) {
    clock_.Advance(Millis(1000));
    Send(fd, "X: y\r\n");
    Spin();
  }
  EXPECT_EQ(Take(fd), "");
  clock_.Advance(Millis(1001));
  Spin();
  bool closed = false;
  const std::string got = Take(fd, &closed);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 408")) << got;
  EXPECT_TRUE(closed);
}

TEST_F(HttpServerTest, SilentAndIdleConnectionsAreClosed) {
  const int silent = Connect();
  const int idle = Connect();
  Send(idle, "GET /now/a HTTP/1.1\r\nHost: x\r\nAuthorization: yes\r\n\r\n");
  Spin();
  EXPECT_NE(Take(idle).find("/now/a"), std::string::npos);
  clock_.Advance(options_.head_timeout + Millis(1));
  Spin();
  bool closed = false;
  EXPECT_EQ(Take(silent, &closed), "");
  EXPECT_TRUE(closed);
  Take(idle, &closed);
  EXPECT_FALSE(closed);  // authenticated: the keep-alive idle timeout applies
  clock_.Advance(options_.idle_timeout);
  Spin();
  Take(idle, &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(server_->connections(), 0u);
}

TEST_F(HttpServerTest, UnauthenticatedConnectionsGetTheShortIdleTimeout) {
  ServerOptions options;
  options.unauthenticated_idle_timeout = Millis(500);
  Start(options);
  const int fd = Connect();
  Send(fd, "GET /now/a HTTP/1.1\r\nHost: x\r\n\r\n");
  Spin();
  EXPECT_NE(Take(fd).find("/now/a"), std::string::npos);
  clock_.Advance(Millis(501));
  Spin();
  bool closed = false;
  Take(fd, &closed);
  EXPECT_TRUE(closed);
}

TEST_F(HttpServerTest, AnAnswerNotTakenIsDroppedAfterTheWriteTimeout) {
  ServerOptions options;
  options.write_timeout = Millis(1000);
  Start(options);
  const int fd = Connect();
  const int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  Send(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  Spin();
  ASSERT_TRUE(service_.stream.has_value());
  Response head;
  head.content_type = "text/event-stream";
  service_.stream->StartStream(head);
  for (int i = 0; i < 256; ++i) service_.stream->Send(std::string(size_t{64} * 1024, 'x'));
  Spin();
  // The client reads nothing: the bytes wait, counted.
  EXPECT_GT(service_.stream->queued_bytes(), size_t{8} << 20);
  EXPECT_FALSE(service_.stream->gone());
  clock_.Advance(Millis(1001));
  Spin();
  EXPECT_TRUE(service_.stream->gone());
  EXPECT_EQ(server_->connections(), 0u);
}

TEST_F(HttpServerTest, StreamsEndWithTheirConnection) {
  const int fd = Connect();
  Send(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  Spin();
  ASSERT_TRUE(service_.stream.has_value());
  Response head;
  head.content_type = "text/event-stream";
  head.body = ": hello\n\n";
  service_.stream->StartStream(head);
  service_.stream->Send("data: 1\n\n");
  Spin();
  EXPECT_EQ(service_.stream->queued_bytes(), 0u);
  service_.stream->Send("data: 2\n\n");
  service_.stream->Finish();
  Spin();
  bool closed = false;
  const std::string got = Take(fd, &closed);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 200")) << got;
  EXPECT_EQ(got.find("Content-Length"), std::string::npos) << got;
  EXPECT_TRUE(got.ends_with(": hello\n\ndata: 1\n\ndata: 2\n\n")) << got;
  EXPECT_TRUE(closed);
}

TEST_F(HttpServerTest, AtTheCapIdleUnauthenticatedConnectionsGoFirst) {
  ServerOptions options;
  options.max_connections = 4;
  Start(options);
  const int busy = Connect();
  Send(busy, "GET /later/x HTTP/1.1\r\nHost: x\r\n\r\n");
  const int authenticated = Connect();
  Send(authenticated, "GET /now/a HTTP/1.1\r\nHost: x\r\nAuthorization: yes\r\n\r\n");
  const int sending = Connect();
  Send(sending, "GET /now/b HTTP/1.1\r\n");
  const int idle = Connect();
  Spin();
  Take(authenticated);
  bool closed = false;
  // Full: the idle unauthenticated one goes, then the one still sending, then the authenticated.
  for (const int expected : {idle, sending, authenticated}) {
    Send(Connect(), "GET /later/y HTTP/1.1\r\nHost: x\r\n\r\n");  // busy from then on
    Spin();
    for (const int fd : {busy, authenticated, sending, idle}) {
      Take(fd, &closed);
      if (fd == expected) {
        EXPECT_TRUE(closed) << fd;
      }
    }
  }
  Take(busy, &closed);
  EXPECT_FALSE(closed);  // waiting for its answer: never evicted
  EXPECT_EQ(server_->connections(), 4u);
}

TEST_F(HttpServerTest, AtTheCapWithEveryoneBusyANewConnectionIsTold503) {
  ServerOptions options;
  options.max_connections = 2;
  Start(options);
  for (int i = 0; i < 2; ++i) Send(Connect(), "GET /later/x HTTP/1.1\r\nHost: x\r\n\r\n");
  Spin();
  const int late = Connect();
  Spin();
  bool closed = false;
  const std::string got = Take(late, &closed);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 503")) << got;
  EXPECT_NE(got.find("Retry-After: 1"), std::string::npos) << got;
  EXPECT_TRUE(closed);
}

TEST_F(HttpServerTest, BoundsHeadsAndBodies) {
  ServerOptions options;
  options.max_head_bytes = 100;
  options.max_body = 10;
  Start(options);
  int fd = Connect();
  Send(fd, "GET /now/a HTTP/1.1\r\nHost: x\r\nX: " + std::string(200, 'a') + "\r\n\r\n");
  Spin();
  EXPECT_TRUE(Take(fd).starts_with("HTTP/1.1 431"));
  fd = Connect();
  Send(fd, "POST /now/a HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n");
  Spin();
  std::string got = Take(fd);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 413")) << got;  // from the head, without 100 Continue
  fd = Connect();
  Send(fd,
       "POST /now/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
       "8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n");
  Spin();
  EXPECT_TRUE(Take(fd).starts_with("HTTP/1.1 413"));
  fd = Connect();
  Send(fd, "POST /now/c HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  Spin();
  EXPECT_EQ(Take(fd), "HTTP/1.1 100 Continue\r\n\r\n");
  Send(fd, "wxyz");
  Spin();
  EXPECT_NE(Take(fd).find("/now/c"), std::string::npos);
  EXPECT_EQ(service_.last_body, "wxyz");
}

TEST_F(HttpServerTest, HeadGetsNoBodyAndClosesAndHttp10Closes) {
  int fd = Connect();
  Send(fd, "HEAD /now/a HTTP/1.1\r\nHost: x\r\n\r\n");
  Spin();
  bool closed = false;
  std::string got = Take(fd, &closed);
  EXPECT_TRUE(got.ends_with("\r\n\r\n")) << got;
  EXPECT_NE(got.find("Content-Length: 6"), std::string::npos) << got;
  EXPECT_TRUE(closed);
  fd = Connect();
  Send(fd, "GET /now/b HTTP/1.0\r\n\r\n");
  Spin();
  got = Take(fd, &closed);
  EXPECT_TRUE(got.ends_with("/now/b")) << got;
  EXPECT_TRUE(closed);
}

TEST_F(HttpServerTest, AnswersAClientThatHalfClosedAfterItsRequest) {
  const int fd = Connect();
  Send(fd, "GET /now/a HTTP/1.1\r\nHost: x\r\n\r\n");
  ::shutdown(fd, SHUT_WR);
  Spin();
  bool closed = false;
  const std::string got = Take(fd, &closed);
  EXPECT_TRUE(got.ends_with("/now/a")) << got;
  EXPECT_TRUE(closed);
  EXPECT_EQ(server_->connections(), 0u);
}

TEST_F(HttpServerTest, ALateAnswerAfterTheClientLeftIsDropped) {
  const int fd = Connect();
  Send(fd, "GET /later/x HTTP/1.1\r\nHost: x\r\n\r\n");
  Spin();
  ASSERT_EQ(service_.held.size(), 1u);
  server_.reset();  // the server goes first: the answer must find it gone, not crash
  EXPECT_TRUE(service_.held[0].gone());
  service_.held[0].Respond(Response{});
  Spin();
}

}  // namespace
}  // namespace streamcar::http

namespace streamcar::http {
namespace {

TEST(WorkerPoolTest, RunsTasksOnAtMostItsThreadsAndHoldsNoneWhenIdle) {
  WorkerPool pool(2);
  EXPECT_EQ(pool.threads(), 0);
  std::mutex mutex;
  std::condition_variable changed;
  int running = 0;
  int most = 0;
  int done = 0;
  bool release = false;
  for (int i = 0; i < 6; ++i) {
    pool.Submit([&] {
      std::unique_lock lock(mutex);
      most = std::max(most, ++running);
      changed.notify_all();
      changed.wait(lock, [&] { return release; });
      --running;
      ++done;
      changed.notify_all();
    });
  }
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return running >= 1; });
    EXPECT_LE(pool.threads(), 2);
    release = true;
    changed.notify_all();
    changed.wait(lock, [&] { return done == 6; });
  }
  EXPECT_LE(most, 2);
  // The threads end once the queue stays empty.
  for (int i = 0; i < 100 && pool.threads() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(pool.threads(), 0);
  // And start again for new work.
  std::atomic<bool> ran{false};
  pool.Submit([&] { ran = true; });
  pool.Stop();
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace streamcar::http

namespace streamcar {
namespace {

TEST(ListenSocketTest, TellsLoopbackFromReachableAddresses) {
  for (const auto& [listen, loopback] : std::vector<std::pair<std::string, bool>>{
           {"127.0.0.1:0", true}, {"[::1]:0", true}, {"0.0.0.0:0", false}, {":0", false}}) {
    auto fd = ListenTcp(listen, "test.listen");
    if (!fd.ok()) continue;  // no IPv6 here
    EXPECT_EQ(BoundToLoopback(*fd), loopback) << listen;
    ::close(*fd);
  }
}

}  // namespace
}  // namespace streamcar
