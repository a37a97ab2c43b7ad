// Bad input from every side (docs/reliability.md's table): Redis states, handler behaviours,
// entries, and requests to the admin port. Each test names what it proves.

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

class BadInputTest : public E2eTest {};

// A handler that reads a request and closes the connection without answering (a reset after the
// request was sent).
class ResettingServer {
 public:
  ResettingServer() : port_(FreePort()) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port_));
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ::listen(fd_, 16);
    thread_ = std::thread([this] {
      while (!stop_) {
        int client = ::accept(fd_, nullptr, nullptr);
        if (client < 0) break;
        char buffer[65536];
        if (::recv(client, buffer, sizeof(buffer), 0) > 0) ++requests_;
        linger hard{1, 0};  // RST, not FIN
        ::setsockopt(client, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
        ::close(client);
      }
    });
  }
  ~ResettingServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }
  int requests() const { return requests_; }

 private:
  int port_;
  int fd_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

TEST_F(BadInputTest, HandlerResetAfterTheRequestIsACountedRetry) {
  ResettingServer resetting;
  SidecarConfig c;
  c.handler_url = resetting.url();
  auto sidecar = StartSidecar(c);
  Add({"k", "v"});
  // Each reset spends an attempt: after max_attempts (3) the entry is dead-lettered, not lost.
  ASSERT_TRUE(Eventually([&] { return Len("orders:dlq") == 1; }, seconds(15))) << sidecar->Logs();
  EXPECT_EQ(resetting.requests(), 3);
  auto letters = DeadLetters();
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].Get("streamcar.status"), "error");
  EXPECT_EQ(letters[0].Get("streamcar.reason"), "max_attempts");
  ASSERT_TRUE(WaitMetric("streamcar_deliveries_total", {"outcome=\"error\""}, 3));
}

TEST_F(BadInputTest, HugeAnswerIsClippedInTheDeadLetter) {
  handler_.SetBehaviour([](const ReceivedRequest&) {
    return HandlerReply{422, std::string(5 << 20, 'e')};
  });
  auto sidecar = StartSidecar({});
  Add({"k", "v"});
  ASSERT_TRUE(Eventually([&] { return Len("orders:dlq") == 1; }, seconds(15))) << sidecar->Logs();
  auto letters = DeadLetters();
  ASSERT_EQ(letters.size(), 1u);
  ASSERT_TRUE(letters[0].Has("streamcar.error"));
  EXPECT_EQ(letters[0].Get("streamcar.error"), std::string(1024, 'e'));
  EXPECT_EQ(letters[0].Get("streamcar.reason"), "rejected");
}

TEST_F(BadInputTest, HugeEntryArrivesIntact) {
  std::string big(4 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<char>('a' + i % 26);
  auto sidecar = StartSidecar({});
  std::string id = Add({"big", big});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(15))) << sidecar->Logs();
  const std::string body = handler_.Requests()[0].body;  // Requests() returns a copy
  EXPECT_GT(body.size(), big.size()) << body.substr(0, 300);
  const size_t at = body.find("\"big\":\"");
  ASSERT_NE(at, std::string::npos);
  size_t diff = 0;
  while (diff < big.size() && body[at + 7 + diff] == big[diff]) ++diff;
  EXPECT_EQ(diff, big.size()) << "first difference at " << diff << ": "
                              << body.substr(at + 7 + diff, 40);
  EXPECT_EQ(body.substr(at + 7 + big.size(), 3), "\"}}");
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10)));
}

TEST_F(BadInputTest, RedisOutOfMemoryKeepsTheEntryPendingUntilItCanBeDeadLettered) {
  // The answer comes late enough for the test to fill Redis's memory meanwhile.
  handler_.SetBehaviour([](const ReceivedRequest&) {
    HandlerReply reply{422, "bad"};
    reply.delay = milliseconds(300);
    return reply;
  });
  redis_->Run({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  SidecarConfig c;
  c.min_idle = "500ms";
  c.claim_interval = "200ms";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  std::string id = Add({"k", "v"});
  // Memory is full from now on: the dead letter's XADD is refused with OOM.
  redis_->Run({"CONFIG", "SET", "maxmemory", "1"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10)));
  // SPEC 4.3 "definite": the settlement is retried while the entry stays held.
  ASSERT_TRUE(
      Eventually([&] { return sidecar->Logs().find("OOM") != std::string::npos; }, seconds(10)))
      << sidecar->Logs();
  ASSERT_TRUE(WaitMetric("streamcar_settle_failures_total", {"class=\"definite\""}, 1));
  EXPECT_EQ(Len("orders:dlq"), 0);
  EXPECT_EQ(PendingCount(), 1);  // not acknowledged: nothing is lost
  // Memory again: the held entry is dead-lettered, without being POSTed a second time.
  redis_->Run({"CONFIG", "SET", "maxmemory", "0"});
  ASSERT_TRUE(
      Eventually([&] { return Len("orders:dlq") == 1 && PendingCount() == 0; }, seconds(15)))
      << sidecar->Logs();
  EXPECT_EQ(RequestsFor(id).size(), 1u);
}

TEST_F(BadInputTest, ReadOnlyReplicaIsRetriedLoudlyNotReady) {
  // A replica of a primary that does not exist: it answers, but refuses writes.
  redis_ = std::make_unique<RedisServer>(
      RedisServerOptions{.extra = {"--replicaof", "127.0.0.1", std::to_string(FreePort())}});
  auto sidecar = StartSidecar({});
  // Loud: the refusal is logged; not ready: the admin server answers 503, and keeps doing so.
  ASSERT_TRUE(Eventually([&] { return sidecar->Logs().find("READONLY") != std::string::npos; },
                         seconds(15)))
      << sidecar->Logs();
  ASSERT_TRUE(
      Eventually([&] { return HttpGet(admin_port_, "/readyz").first == 503; }, seconds(15)));
  // Retried: a second attempt is logged while the process stays up and not ready.
  ASSERT_TRUE(Eventually(
      [&] {
        const std::string logs = sidecar->Logs();
        const size_t first = logs.find("READONLY");
        return logs.find("READONLY", first + 1) != std::string::npos;
      },
      seconds(30)))
      << sidecar->Logs();
  EXPECT_TRUE(sidecar->running());
  EXPECT_EQ(HttpGet(admin_port_, "/readyz").first, 503);
}

TEST_F(BadInputTest, AdminPortBoundsRequestSize) {
  auto sidecar = StartSidecar({});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  httplib::Client client("127.0.0.1", admin_port_);
  auto big = client.Post("/metrics", std::string(1 << 20, 'x'), "text/plain");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(HttpGet(admin_port_, "/healthz").first, 200);  // still serving
}

TEST_F(BadInputTest, NoSecretInMetricsOrLogs) {
  redis_ = std::make_unique<RedisServer>(RedisServerOptions{.password = "top-secret-pw"});
  SidecarConfig c;
  c.redis_url = "redis://default:top-secret-pw@127.0.0.1:" + std::to_string(redis_->port()) + "/0";
  // SPEC 11: the handler's bearer token and HMAC secret are secrets too.
  const std::string token_dir = MakeTempDir("streamcar-token-");
  std::ofstream(token_dir + "/token") << "top-secret-token\n";
  c.handler_extra = "auth: { bearer_token_file: \"" + token_dir +
                    "/token\", hmac_secret: \"top-secret-hmac-0123456789\" }";
  SidecarProcess sidecar(Yaml(c));
  ASSERT_TRUE(WaitReady()) << sidecar.Logs();
  Add({"k", "v"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10)));
  EXPECT_EQ(handler_.Requests()[0].Header("authorization"), "Bearer top-secret-token");
  EXPECT_FALSE(handler_.Requests()[0].Header("streamcar-signature").empty());
  const std::string metrics = Metrics();
  const auto checked = RunStreamcar({"check", "-c", sidecar.config_path()});
  EXPECT_EQ(checked.exit_code, 0) << checked.err;
  sidecar.Terminate();
  auto code = sidecar.Wait(seconds(15));
  ASSERT_TRUE(code.has_value()) << sidecar.Logs();
  EXPECT_EQ(*code, 0) << sidecar.Logs();
  for (const std::string secret : {"top-secret-pw", "top-secret-token", "top-secret-hmac"}) {
    EXPECT_EQ(metrics.find(secret), std::string::npos) << secret;
    EXPECT_EQ(sidecar.Logs().find(secret), std::string::npos) << sidecar.Logs();
    EXPECT_EQ(checked.out.find(secret), std::string::npos) << checked.out;
  }
  EXPECT_NE(sidecar.Logs().find("redis://default:***@"), std::string::npos) << sidecar.Logs();
  std::error_code ignored;
  std::filesystem::remove_all(token_dir, ignored);
}

}  // namespace
}  // namespace streamcar::testing
