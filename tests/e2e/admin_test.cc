// The admin port (SPEC 5) against the real binary: GET only, 405 for HEAD and every other method
// on every path, /healthz within 1 s whatever other clients hold open, and every labelled metric
// series present at 0 from the start.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "tests/e2e/e2e_fixture.h"
#include "tests/support/request_gate.h"

namespace streamcar::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A TCP connection to 127.0.0.1:port (blocking), or -1.
int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` on a new connection and reads the answer until the server closes it or
// `timeout` passes. The raw answer ("" when nothing came).
std::string Exchange(int port, const std::string& request, std::chrono::milliseconds timeout,
                     bool until_close = false) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  const auto deadline = Clock::now() + timeout;
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  char buffer[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 1))) <= 0) break;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    answer.append(buffer, static_cast<size_t>(n));
    // A HEAD answer has no body; one whole head is enough for a Connection: close answer.
    if (!until_close && answer.find("\r\n\r\n") != std::string::npos &&
        answer.find("Connection: close") == std::string::npos) {
      break;
    }
  }
  ::close(fd);
  return answer;
}

int StatusOf(const std::string& answer) {
  if (!answer.starts_with("HTTP/1.1 ") || answer.size() < 12) return 0;
  return std::stoi(answer.substr(9, 3));
}

class AdminTest : public E2eTest {};

TEST_F(AdminTest, HeadAndEveryMethodButGetAre405OnEveryPath) {
  auto sidecar = StartSidecar({});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  for (const std::string method : {"HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "POST", "TRACE"}) {
    for (const std::string path : {"/healthz", "/readyz", "/metrics", "/anything", "/"}) {
      const std::string answer = Exchange(
          admin_port_, method + " " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
          std::chrono::seconds(5));
      EXPECT_EQ(StatusOf(answer), 405) << method << " " << path << ": " << answer;
      EXPECT_NE(answer.find("\r\nAllow: GET\r\n"), std::string::npos) << answer;
      if (method == "HEAD") {
        // No body after a HEAD answer's head, whatever Content-Length says.
        EXPECT_EQ(answer.substr(answer.find("\r\n\r\n") + 4), "") << answer;
      }
    }
  }
  // GET is still served, an unknown path is 404, and the process is unharmed.
  EXPECT_EQ(HttpGet(admin_port_, "/healthz").first, 200);
  EXPECT_EQ(HttpGet(admin_port_, "/readyz").first, 200);
  EXPECT_EQ(HttpGet(admin_port_, "/nothing").first, 404);
  EXPECT_EQ(StatusOf(Exchange(admin_port_, "GET /metrics?x=1 HTTP/1.0\r\n\r\n", seconds(5))), 200);
  EXPECT_TRUE(sidecar->running());
}

TEST_F(AdminTest, MalformedAndOversizedRequestsAreRefusedAndServingGoesOn) {
  auto sidecar = StartSidecar({});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  EXPECT_EQ(StatusOf(Exchange(admin_port_, "GARBAGE\r\n\r\n", seconds(5))), 400);
  EXPECT_EQ(StatusOf(Exchange(admin_port_, "GET /healthz HTTP/2.0\r\n\r\n", seconds(5))), 505);
  EXPECT_EQ(
      StatusOf(Exchange(admin_port_,
                        "GET /healthz HTTP/1.1\r\nX-Big: " + std::string(8192, 'a') + "\r\n\r\n",
                        seconds(5))),
      431);
  EXPECT_EQ(StatusOf(Exchange(admin_port_,
                              "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\n",
                              seconds(5))),
            413);
  // Two pipelined requests on one connection get two answers, in order.
  const std::string two = Exchange(admin_port_,
                                   "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                                   "GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                                   seconds(5), true);
  EXPECT_EQ(StatusOf(two), 200) << two;
  EXPECT_NE(two.find("HTTP/1.1 404"), std::string::npos) << two;
  EXPECT_EQ(HttpGet(admin_port_, "/healthz").first, 200);
}

// Connections that hold the admin port without completing a request: idle ones, slow-loris
// senders that trickle a byte at a time, half-open ones (a partial request, then FIN), and
// readers that ask for /metrics and never read the answer. All of them are reopened as the server
// closes them, so the pressure never lets up.
class PortHogs {
 public:
  PortHogs(int port, int idle, int trickling, int half_open, int non_reading) : port_(port) {
    for (int i = 0; i < idle; ++i) idle_.push_back(Connect(port_));
    for (int i = 0; i < trickling; ++i) trickling_.push_back(StartTrickling());
    for (int i = 0; i < half_open; ++i) half_open_.push_back(HalfOpen());
    for (int i = 0; i < non_reading; ++i) non_reading_.push_back(NonReading());
    thread_ = std::thread([this] { Run(); });
  }
  ~PortHogs() {
    stop_ = true;
    thread_.join();
    for (auto* group : {&idle_, &trickling_, &half_open_, &non_reading_}) {
      for (int fd : *group) {
        if (fd >= 0) ::close(fd);
      }
    }
  }
  int reopened() const { return reopened_; }

 private:
  int StartTrickling() {
    const int fd = Connect(port_);
    if (fd >= 0) ::send(fd, "GET /healthz HTTP/1.1\r\nX-Slow: ", 31, MSG_NOSIGNAL);
    return fd;
  }
  int HalfOpen() {
    const int fd = Connect(port_);
    if (fd >= 0) {
      ::send(fd, "GET /metrics HTTP/1.1\r\nHost:", 28, MSG_NOSIGNAL);
      ::shutdown(fd, SHUT_WR);
    }
    return fd;
  }
  int NonReading() {
    const int fd = Connect(port_);
    if (fd >= 0) {
      const int small = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
      const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
      for (int i = 0; i < 50; ++i) ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    }
    return fd;
  }
  // True when the server closed `fd` (or it never opened).
  static bool Closed(int fd) {
    if (fd < 0) return true;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if ((p.revents & (POLLHUP | POLLERR)) != 0) return true;
    char byte;
    return ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }
  template <typename Open>
  void Refill(std::vector<int>* group, Open open) {
    for (int& fd : *group) {
      if (!Closed(fd)) continue;
      if (fd >= 0) ::close(fd);
      fd = open();
      ++reopened_;
    }
  }
  void Run() {
    while (!stop_) {
      for (int fd : trickling_) {
        if (fd >= 0) ::send(fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      Refill(&idle_, [this] { return Connect(port_); });
      Refill(&trickling_, [this] { return StartTrickling(); });
      Refill(&half_open_, [this] { return HalfOpen(); });
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  int port_;
  std::vector<int> idle_, trickling_, half_open_, non_reading_;
  std::atomic<bool> stop_{false};
  std::atomic<int> reopened_{0};
  std::thread thread_;
};

TEST_F(AdminTest, HealthzAnswersWithinOneSecondWhateverOtherClientsHold) {
  auto sidecar = StartSidecar({});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  // More connections than the server keeps (256): it must shed the idle ones, not the probes.
  PortHogs hogs(admin_port_, 200, 50, 20, 10);
  // Probe like the kubelet does (a new connection, 1 s timeout), for longer than the request
  // timeout and the old keep-alive, so the hogs are closed and reopened meanwhile.
  const auto until = Clock::now() + seconds(8);
  int probes = 0;
  while (Clock::now() < until) {
    const auto started = Clock::now();
    const std::string answer =
        Exchange(admin_port_, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                 milliseconds(1000));
    const auto took = Clock::now() - started;
    ASSERT_EQ(StatusOf(answer), 200)
        << "probe " << probes << " got [" << answer << "] after "
        << std::chrono::duration_cast<milliseconds>(took).count() << " ms";
    EXPECT_LT(took, milliseconds(1000));
    ++probes;
    std::this_thread::sleep_for(milliseconds(200));
  }
  EXPECT_GE(probes, 10);
  EXPECT_GT(hogs.reopened(), 0);  // the server did close hogs: the pressure was renewed
  EXPECT_TRUE(sidecar->running());
  EXPECT_EQ(HttpGet(admin_port_, "/readyz").first, 200);
}

TEST_F(AdminTest, EveryLabelledSeriesExistsAtZeroFromTheStart) {
  // Redis is unreachable: nothing is read, delivered or trimmed, yet every series is there.
  const int dead_port = FreePort();
  SidecarConfig c;
  c.subscription_extra =
      "    retention: { max_len: 1000, interval: 1s }\n"
      "    dead_letter: { max_len: 100 }\n";
  std::string yaml = Yaml(c);
  yaml.replace(yaml.find(redis_->url()), redis_->url().size(),
               "redis://127.0.0.1:" + std::to_string(dead_port) + "/0");
  SidecarProcess sidecar(yaml);
  std::string text;
  ASSERT_TRUE(Eventually(
      [&] {
        text = HttpGet(admin_port_, "/metrics").second;
        return !text.empty();
      },
      seconds(10)))
      << sidecar.Logs();
  const std::string sub = "subscription=\"orders/billing\"";
  for (const std::string outcome : {"success", "retry", "reject", "timeout", "error"}) {
    EXPECT_EQ(MetricValue(text, "streamcar_deliveries_total", {sub, "outcome=\"" + outcome + "\""}),
              0)
        << outcome << "\n"
        << text;
  }
  for (const std::string reason : {"max_attempts", "rejected", "dropped", "invalid"}) {
    EXPECT_EQ(
        MetricValue(text, "streamcar_dead_lettered_total", {sub, "reason=\"" + reason + "\""}), 0)
        << reason;
  }
  for (const std::string source : {"drain", "autoclaim"}) {
    EXPECT_EQ(MetricValue(text, "streamcar_claimed_total", {sub, "source=\"" + source + "\""}), 0)
        << source;
  }
  EXPECT_EQ(MetricValue(text, "streamcar_acked_total", {sub}), 0);
  EXPECT_EQ(MetricValue(text, "streamcar_deleted_entries_total", {sub}), 0);
  EXPECT_EQ(MetricValue(text, "streamcar_delivery_duration_seconds_count", {sub}), 0);
  EXPECT_EQ(MetricValue(text, "streamcar_end_to_end_seconds_count", {sub}), 0);
  EXPECT_EQ(MetricValue(text, "streamcar_inflight", {sub}), 0);
  EXPECT_EQ(MetricValue(text, "streamcar_pending", {sub}), 0);
  EXPECT_EQ(MetricValue(text, "streamcar_lag", {sub}), 0);
  EXPECT_EQ(MetricValue(text, "streamcar_oldest_pending_seconds", {sub}), 0);
  EXPECT_GE(MetricValue(text, "streamcar_handler_up", {sub}), 0);
  EXPECT_EQ(MetricValue(text, "streamcar_redis_up"), 0);
  // The retention rules are known at start: the stream and its dead-letter stream.
  EXPECT_EQ(MetricValue(text, "streamcar_trimmed_total", {"stream=\"orders\""}), 0) << text;
  EXPECT_EQ(MetricValue(text, "streamcar_trimmed_total", {"stream=\"orders:dlq\""}), 0) << text;
}

// SPEC 5: streamcar_pending is the group's PEL, streamcar_lag the entries the group has not read
// (Redis's own lag, or counted when Redis has none), streamcar_inflight what this sidecar holds.
TEST_F(AdminTest, PendingLagAndInflightGaugesFollowTheGroup) {
  // The handler holds every request until released: what was read stays pending.
  auto gate = std::make_shared<RequestGate>();
  handler_.SetBehaviour([gate](const ReceivedRequest&) {
    gate->Hold(seconds(30));
    return HandlerReply{200, ""};
  });
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Add({"n", std::to_string(i)}));
  SidecarConfig c;
  c.handler_extra = "concurrency: 1, timeout: 30s";
  auto sidecar = StartSidecar(c);
  OpenAtExit open_at_exit{gate};

  const std::string sub = "subscription=\"orders/billing\"";
  // Redis's own figures, once reading has stopped for want of room.
  auto redis_lag = [&]() -> std::optional<int64_t> {
    auto groups = redis_->Run({"XINFO", "GROUPS", "orders"});
    auto row = groups.view()[0];
    for (size_t k = 0; k + 1 < row.Size(); k += 2) {
      if (row[k].Str() == "lag" && row[k + 1].IsInteger()) return row[k + 1].Integer();
    }
    return std::nullopt;
  };
  int64_t pending = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        const std::string text = Metrics();
        pending = PendingCount();
        return pending > 0 && pending < 10 &&
               MetricValue(text, "streamcar_pending", {sub}) == static_cast<double>(pending) &&
               MetricValue(text, "streamcar_lag", {sub}) == static_cast<double>(10 - pending) &&
               MetricValue(text, "streamcar_inflight", {sub}) == static_cast<double>(pending);
      },
      seconds(20)))
      << Metrics() << sidecar->Logs();
  EXPECT_EQ(redis_lag(), 10 - pending);

  // Deleting an unread entry leaves Redis without a lag of its own: it is counted instead.
  redis_->Run({"XDEL", "orders", ids.back()});
  ASSERT_EQ(redis_lag(), std::nullopt);
  EXPECT_TRUE(Eventually(
      [&] { return Metric("streamcar_lag", {sub}) == static_cast<double>(10 - pending - 1); },
      seconds(20)))
      << Metrics();

  gate->Open();
  EXPECT_TRUE(Eventually(
      [&] {
        const std::string text = Metrics();
        return PendingCount() == 0 && MetricValue(text, "streamcar_pending", {sub}) == 0 &&
               MetricValue(text, "streamcar_inflight", {sub}) == 0;
      },
      seconds(30)))
      << Metrics() << sidecar->Logs();
}

}  // namespace
}  // namespace streamcar::testing
