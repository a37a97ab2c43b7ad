// The handler client (sidecar/delivery/http_deliverer.h) against raw-socket servers written in the
// test, so that a handler can misbehave on purpose: answer twice, answer early, answer when nobody
// asked, break framing, trickle, reset. An answer must never be matched to a request it did not
// answer (SPEC 3.1), and handler.timeout bounds the whole exchange (SPEC 3.2).

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "sidecar/delivery/http_deliverer.h"
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
  EXPECT_EQ(seen,
            "POST /in%20put?q=1 HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(server.port()) +
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
      peer.Send(
          "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
          "chunked\r\n\r\n4\r\n{\"st\r\n2\r\n\"}\r\n0\r\n\r\n");
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
    const std::string answer =
        "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n" + std::string(50, 'x');
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
