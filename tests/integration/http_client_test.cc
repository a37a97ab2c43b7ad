// The handler client (sidecar/delivery/http_deliverer.h) against raw-socket servers written in the
// test, so that a handler can misbehave on purpose: answer twice, answer early, answer when nobody
// asked, break framing, trickle, reset. An answer must never be matched to a request it did not
// answer (SPEC 3.1), and handler.timeout bounds the whole exchange (SPEC 3.2).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/delivery/http_deliverer.h"
#include "tests/support/certificates.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::delivery {
namespace {

using Kind = HandlerResponse::Kind;
using std::chrono::milliseconds;

// One accepted connection, plain or TLS, as the server's script sees it.
class Peer {
 public:
  virtual ~Peer() = default;
  virtual ssize_t Recv(char* buffer, size_t size) = 0;  // 0: closed
  virtual bool Send(std::string_view data) = 0;
  int fd = -1;

  // Reads one request (head and Content-Length body); "" when the client closed.
  std::string ReadRequest() {
    std::string text;
    char buffer[4096];
    while (true) {
      const size_t head_end = text.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t length = 0;
        const size_t at = text.find("Content-Length: ");
        if (at != std::string::npos && at < head_end) length = std::stoul(text.substr(at + 16));
        if (text.size() >= head_end + 4 + length) return text;
      }
      const ssize_t n = Recv(buffer, sizeof(buffer));
      if (n <= 0) return "";
      text.append(buffer, static_cast<size_t>(n));
    }
  }
  // Reads only up to the end of the request head.
  std::string ReadHead() {
    std::string text;
    char c;
    while (text.find("\r\n\r\n") == std::string::npos) {
      if (Recv(&c, 1) <= 0) return "";
      text += c;
    }
    return text;
  }
};

class PlainPeer final : public Peer {
 public:
  ssize_t Recv(char* buffer, size_t size) override { return ::recv(fd, buffer, size, 0); }
  bool Send(std::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
};

class TlsPeer final : public Peer {
 public:
  explicit TlsPeer(SSL* ssl) : ssl_(ssl) {}
  ~TlsPeer() override { SSL_free(ssl_); }
  ssize_t Recv(char* buffer, size_t size) override {
    const int n = SSL_read(ssl_, buffer, static_cast<int>(size));
    return n > 0 ? n : 0;
  }
  bool Send(std::string_view data) override {
    return SSL_write(ssl_, data.data(), static_cast<int>(data.size())) ==
           static_cast<int>(data.size());
  }

 private:
  SSL* ssl_;
};

// A TCP server on 127.0.0.1 that runs `script` on each accepted connection, in its own thread.
class RawServer {
 public:
  using Script = std::function<void(Peer& peer, int connection_index)>;

  explicit RawServer(Script script, SSL_CTX* tls = nullptr, int receive_buffer = 0)
      : script_(std::move(script)), tls_(tls) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (receive_buffer > 0) {
      ::setsockopt(listen_fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(listen_fd_, 16), 0);
    socklen_t length = sizeof(address);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }

  ~RawServer() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& thread : threads_) thread.join();
    ::close(listen_fd_);
  }

  std::string url(const std::string& path = "/") const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_) + path;
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }
  bool stopping() const { return stop_; }

 private:
  void Accept() {
    while (!stop_) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      const int index = accepted_++;
      std::lock_guard lock(mu_);
      fds_.push_back(fd);
      threads_.emplace_back([this, fd, index] {
        std::unique_ptr<Peer> peer;
        if (tls_ != nullptr) {
          SSL* ssl = SSL_new(tls_);
          SSL_set_fd(ssl, fd);
          if (SSL_accept(ssl) != 1) {
            SSL_free(ssl);
            ::close(fd);
            return;
          }
          peer = std::make_unique<TlsPeer>(ssl);
        } else {
          peer = std::make_unique<PlainPeer>();
        }
        peer->fd = fd;
        script_(*peer, index);
        peer.reset();
        ::close(fd);
      });
    }
  }

  Script script_;
  SSL_CTX* tls_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
};

std::string Answer(int status, std::string_view body = "", std::string_view extra = "") {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + std::string(extra) + "\r\n" + std::string(body);
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

TEST(HttpClientTest, KeepAliveServesAHundredRequestsOnOneConnection) {
  RawServer server(Always(200));
  HttpDeliverer client(server.url("/orders"), milliseconds(5000));
  for (int i = 0; i < 100; ++i) {
    auto response = client.Post(Request());
    ASSERT_EQ(response.kind, Kind::kAnswered) << i << ": " << response.error;
    ASSERT_EQ(response.status, 200);
    ASSERT_EQ(response.body, "ok");
  }
  EXPECT_EQ(client.connections_opened(), 1);
  EXPECT_EQ(server.accepted(), 1);
}

TEST(HttpClientTest, TheRequestOnTheWireIsExact) {
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
  HttpDeliverer client(server.url("/in put?q=1#frag"), milliseconds(5000));
  auto response = client.Post(Request(R"({"a":1})"));
  ASSERT_EQ(response.kind, Kind::kAnswered) << response.error;
  EXPECT_EQ(response.status, 204);
  std::lock_guard lock(mu);
  EXPECT_EQ(seen, "POST /in%20put?q=1 HTTP/1.1\r\nHost: 127.0.0.1:" +
                      std::to_string(server.port()) +
                      "\r\nContent-Type: application/json\r\nUser-Agent: streamcar/0.1.0\r\n"
                      "Content-Length: 7\r\nStreamcar-Id: 1-0\r\n\r\n{\"a\":1}");
}

// The loss of issue 10: a handler answers 503 and then a second, unsolicited 200 on the same
// connection. The 200 must not become the answer of the next request.
TEST(HttpClientTest, UnsolicitedAnswerOnAnIdleConnectionIsNeverTakenForTheNext) {
  std::atomic<bool> extra_sent{false};
  RawServer server([&](Peer& peer, int index) {
    if (index == 0) {
      if (peer.ReadRequest().empty()) return;
      peer.Send(Answer(503, "no"));
      // Later, with no request outstanding:
      std::this_thread::sleep_for(milliseconds(50));
      peer.Send(Answer(200, "smuggled"));
      extra_sent = true;
      peer.ReadRequest();  // whatever comes next stays unanswered here
      return;
    }
    Always(202)(peer, index);
  });
  HttpDeliverer client(server.url(), milliseconds(5000));
  auto first = client.Post(Request());
  ASSERT_EQ(first.kind, Kind::kAnswered) << first.error;
  EXPECT_EQ(first.status, 503);
  ASSERT_TRUE(WaitUntil([&] { return extra_sent.load(); }));
  auto second = client.Post(Request());
  ASSERT_EQ(second.kind, Kind::kAnswered) << second.error;
  EXPECT_EQ(second.status, 202) << "the smuggled 200 was taken as the answer";
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST(HttpClientTest, TwoAnswersToOneRequestFailTheRequest) {
  RawServer server([](Peer& peer, int index) {
    if (index == 0) {
      if (peer.ReadRequest().empty()) return;
      peer.Send(Answer(503, "no") + Answer(200, "smuggled"));
      peer.ReadRequest();
      return;
    }
    Always(200)(peer, index);
  });
  HttpDeliverer client(server.url(), milliseconds(5000));
  auto first = client.Post(Request());
  EXPECT_EQ(first.kind, Kind::kError);
  EXPECT_NE(first.error.find("after its answer"), std::string::npos) << first.error;
  auto second = client.Post(Request());
  ASSERT_EQ(second.kind, Kind::kAnswered) << second.error;
  EXPECT_EQ(second.body, "ok");
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST(HttpClientTest, AnAnswerBeforeTheRequestWasFullySentFailsIt) {
  std::atomic<bool> release{false};
  RawServer server(
      [&](Peer& peer, int) {
        if (peer.ReadHead().empty()) return;
        peer.Send(Answer(200, "early"));
        // Read nothing more: the client's write of the large body stays blocked.
        while (!release) std::this_thread::sleep_for(milliseconds(10));
      },
      nullptr, /*receive_buffer=*/4096);
  HttpDeliverer client(server.url(), milliseconds(5000));
  const auto response = client.Post(Request(std::string(8 << 20, 'x')));
  EXPECT_EQ(response.kind, Kind::kError) << response.status;
  EXPECT_NE(response.error.find("before the request was fully sent"), std::string::npos)
      << response.error;
  release = true;
}

TEST(HttpClientTest, GarbageStatusLineFailsTheRequestAndTheConnection) {
  RawServer server([](Peer& peer, int index) {
    if (index == 0) {
      if (peer.ReadRequest().empty()) return;
      peer.Send("HTXP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
      peer.ReadRequest();
      return;
    }
    Always(200)(peer, index);
  });
  HttpDeliverer client(server.url(), milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kError);
  EXPECT_NE(response.error.find("malformed"), std::string::npos) << response.error;
  EXPECT_EQ(client.Post(Request()).status, 200);
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST(HttpClientTest, ContentLengthWithTransferEncodingIsRefused) {
  RawServer server([](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    peer.Send(
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
        "0\r\n\r\n");
    peer.ReadRequest();
  });
  HttpDeliverer client(server.url(), milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kError);
  EXPECT_NE(response.error.find("Transfer-Encoding"), std::string::npos) << response.error;
}

TEST(HttpClientTest, ChunkedAndCloseDelimitedAnswersAreRead) {
  RawServer server([](Peer& peer, int index) {
    if (peer.ReadRequest().empty()) return;
    if (index == 0) {
      peer.Send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"st\r\n2\r\n\"}\r\n0\r\n\r\n");
      peer.ReadRequest();
    } else {
      peer.Send("HTTP/1.1 500 Oops\r\n\r\nall until close");
    }
  });
  HttpDeliverer client(server.url(), milliseconds(5000));
  auto chunked = client.Post(Request());
  ASSERT_EQ(chunked.kind, Kind::kAnswered) << chunked.error;
  EXPECT_EQ(chunked.body, "{\"st\"}");
  // Forces a new connection for the close-delimited one.
  RawServer other([](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    peer.Send("HTTP/1.1 500 Oops\r\n\r\nall until close");
  });
  HttpDeliverer client2(other.url(), milliseconds(5000));
  auto closed = client2.Post(Request());
  ASSERT_EQ(closed.kind, Kind::kAnswered) << closed.error;
  EXPECT_EQ(closed.status, 500);
  EXPECT_EQ(closed.body, "all until close");
}

TEST(HttpClientTest, TricklingAnswerTimesOutAtTheTotalDeadline) {
  RawServer server([](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n" + std::string(50, 'x');
    // One byte every 100 ms: each read is quick, the whole answer takes about 9 s.
    for (char c : answer) {
      if (!peer.Send(std::string(1, c))) return;
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  HttpDeliverer client(server.url(), milliseconds(1000));
  const auto started = std::chrono::steady_clock::now();
  auto response = client.Post(Request());
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(response.kind, Kind::kTimeout) << response.status << " " << response.error;
  EXPECT_GE(took, milliseconds(1000));
  EXPECT_LT(took, milliseconds(1500));
}

TEST(HttpClientTest, ResetAfterTheRequestIsAnError) {
  RawServer server([](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    linger hard{1, 0};
    ::setsockopt(peer.fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
  });
  HttpDeliverer client(server.url(), milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kError) << response.error;
}

TEST(HttpClientTest, CloseWithoutAnAnswerIsAnError) {
  RawServer server([](Peer& peer, int) { peer.ReadRequest(); });
  HttpDeliverer client(server.url(), milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kError) << response.error;
  EXPECT_NE(response.error.find("closed"), std::string::npos) << response.error;
}

TEST(HttpClientTest, RefusedConnectionIsRefused) {
  int port;
  {
    RawServer gone(Always(200));
    port = gone.port();
  }
  HttpDeliverer client("http://127.0.0.1:" + std::to_string(port) + "/", milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kRefused) << response.error;
  EXPECT_NE(response.error.find("http://127.0.0.1:" + std::to_string(port)), std::string::npos)
      << response.error;
  EXPECT_FALSE(client.Get());
}

TEST(HttpClientTest, ConnectionCloseIsHonoured) {
  RawServer server([](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    peer.Send(Answer(200, "ok", "Connection: close\r\n"));
    // Keeps the socket open: the client must not reuse it anyway.
    peer.ReadRequest();
  });
  HttpDeliverer client(server.url(), milliseconds(5000));
  for (int i = 0; i < 3; ++i) {
    auto response = client.Post(Request());
    ASSERT_EQ(response.kind, Kind::kAnswered) << response.error;
  }
  EXPECT_EQ(client.connections_opened(), 3);
}

TEST(HttpClientTest, IdleConnectionClosedByTheHandlerIsReplaced) {
  std::atomic<bool> closed{false};
  RawServer server([&](Peer& peer, int) {
    if (peer.ReadRequest().empty()) return;
    peer.Send(Answer(200, "ok"));
    ::shutdown(peer.fd, SHUT_RDWR);  // an idle timeout on the handler's side
    closed = true;
  });
  HttpDeliverer client(server.url(), milliseconds(5000));
  ASSERT_EQ(client.Post(Request()).status, 200);
  ASSERT_TRUE(WaitUntil([&] { return closed.load(); }));
  auto response = client.Post(Request());
  ASSERT_EQ(response.kind, Kind::kAnswered) << response.error;
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST(HttpClientTest, GetIsTrueOnlyFor2xx) {
  RawServer up(Always(200));
  RawServer down(Always(503));
  EXPECT_TRUE(HttpDeliverer(up.url("/healthz"), milliseconds(2000)).Get());
  EXPECT_FALSE(HttpDeliverer(down.url("/healthz"), milliseconds(2000)).Get());
}

// https:// handlers: verified against the system trust store (here SSL_CERT_FILE, which OpenSSL
// reads as the system store), kept alive like plain connections.
class HttpsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("streamcar-https-" + std::to_string(::getpid()) + "-" +
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

TEST_F(HttpsClientTest, TrustedHandlerIsServedOverOneConnection) {
  ::setenv("SSL_CERT_FILE", certs_.ca_cert.c_str(), 1);
  RawServer server(Always(200), ctx_);
  HttpDeliverer client(server.url(), milliseconds(5000));
  for (int i = 0; i < 10; ++i) {
    auto response = client.Post(Request(std::string(100000, 'x')));
    ASSERT_EQ(response.kind, Kind::kAnswered) << i << ": " << response.error;
    ASSERT_EQ(response.status, 200);
  }
  EXPECT_EQ(client.connections_opened(), 1);
  HttpDeliverer by_name("https://localhost:" + std::to_string(server.port()) + "/",
                        milliseconds(5000));
  EXPECT_EQ(by_name.Post(Request()).status, 200);
}

TEST_F(HttpsClientTest, UntrustedHandlerIsRefusedClearly) {
  ::setenv("SSL_CERT_FILE", certs_.other_ca_cert.c_str(), 1);
  RawServer server(Always(200), ctx_);
  HttpDeliverer client(server.url(), milliseconds(5000));
  auto response = client.Post(Request());
  EXPECT_EQ(response.kind, Kind::kRefused);
  EXPECT_NE(response.error.find("not trusted"), std::string::npos) << response.error;
  EXPECT_EQ(response.error.find("redis"), std::string::npos) << response.error;
}

TEST_F(HttpsClientTest, SmuggledAnswerOverTlsIsNeverTakenForTheNext) {
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
  HttpDeliverer client(server.url(), milliseconds(5000));
  EXPECT_EQ(client.Post(Request()).status, 503);
  ASSERT_TRUE(WaitUntil([&] { return extra_sent.load(); }));
  EXPECT_EQ(client.Post(Request()).status, 202);
}

}  // namespace
}  // namespace streamcar::delivery
