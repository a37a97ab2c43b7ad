// The log API under hostile clients (issue 29's "Done when", the review
// ../shared/reviews/2026-12-02-hostile-clients.md): the real binary over real sockets, so these
// hold whatever the server looks like inside. Before issue 29 the API ran a thread per connection
// (up to 512): 512 idle or unauthenticated connections locked everyone else out (F2), followers
// that never read took the process past a gigabyte (F3), and a cross-site page could append (F6).

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/log/api_server.h"
#include "tests/e2e/log_api_fixture.h"

namespace streamcar::testing {
namespace {

const std::string kToken = "tok-hostile-7d2e";

// Closes every connection it holds when it goes.
class Connections {
 public:
  ~Connections() {
    for (const int fd : fds_) ::close(fd);
  }
  void Add(int fd) { fds_.push_back(fd); }
  const std::vector<int>& fds() const { return fds_; }

 private:
  std::vector<int> fds_;
};

// Samples the resident memory of a process every 50 ms on a thread of its own, keeping the peak.
class PeakResident {
 public:
  explicit PeakResident(pid_t pid) {
    thread_ = std::thread([this, pid] {
      while (!stop_.load()) {
        peak_kib_ = std::max(peak_kib_.load(), ResidentKiB(pid));
        std::this_thread::sleep_for(milliseconds(50));
      }
    });
  }
  ~PeakResident() { Stop(); }
  PeakResident(const PeakResident&) = delete;
  PeakResident& operator=(const PeakResident&) = delete;
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t peak_mib() const { return peak_kib_.load() / 1024; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> peak_kib_{0};
  std::thread thread_;
};

// Clients that never authenticate, kept connected on a thread of their own as an attacker would:
// one in two sends nothing, the others a head cut short, and one in twelve a whole request without
// the token; whatever the server closes (after a 401, a head deadline, an eviction) connects again
// and sends the same, at most 200 every 100 ms.
class HostileClients {
 public:
  HostileClients(int port, int count) : port_(port), fds_(static_cast<size_t>(count), -1) {
    for (size_t i = 0; i < fds_.size(); ++i) fds_[i] = Open(i);
    thread_ = std::thread([this] { Keep(); });
  }
  ~HostileClients() {
    stop_ = true;
    thread_.join();
    for (const int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  HostileClients(const HostileClients&) = delete;
  HostileClients& operator=(const HostileClients&) = delete;

  bool all_connected() const { return all_connected_.load(); }
  int reconnects() const { return reconnects_.load(); }

 private:
  int Open(size_t i) {
    const int fd = ConnectTo(port_);
    if (fd < 0) {
      all_connected_ = false;
      return -1;
    }
    if (i % 12 == 11) {
      SendAll(fd, "GET /v1/streams/feed/entries HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    } else if (i % 2 == 1) {
      SendAll(fd, "POST /v1/streams/feed/entries HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le");
    }
    return fd;
  }

  void Keep() {
    while (!stop_.load()) {
      std::vector<pollfd> polled;
      polled.reserve(fds_.size());
      for (const int fd : fds_) polled.push_back(pollfd{fd, POLLIN, 0});
      ::poll(polled.data(), polled.size(), 100);
      int opened = 0;
      for (size_t i = 0; i < fds_.size() && opened < 200; ++i) {
        if (polled[i].revents == 0 && fds_[i] >= 0) continue;
        char scratch[4096];
        if (fds_[i] >= 0 && ::recv(fds_[i], scratch, sizeof(scratch), MSG_DONTWAIT) > 0) continue;
        if (fds_[i] >= 0) ::close(fds_[i]);
        fds_[i] = Open(i);
        ++opened;
        ++reconnects_;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
  }

  const int port_;
  std::vector<int> fds_;  // touched by the keeping thread only once it runs
  std::atomic<bool> all_connected_{true};
  std::atomic<bool> stop_{false};
  std::atomic<int> reconnects_{0};
  std::thread thread_;
};

class ApiHostileTest : public LogApiTest {
 protected:
  // A stream "feed" and the token kToken.
  void StartWithToken() {
    const std::string token_path = WriteConfig(kToken + "\n");
    StartApi("  - name: feed\n", "  token_file: " + token_path + "\n");
  }
  ApiAnswer Append(const std::string& body, const std::string& content_type,
                   std::vector<std::string> headers = {}) {
    headers.push_back("Content-Type: " + content_type);
    return Exchange(api_port_, "POST", "/v1/streams/feed/entries", headers, body);
  }
};

// Review F2 (api_conn_exhaust.py), issue 29: 600 connections that never authenticate (silent,
// a head cut short, or a request without the token) must not keep an authenticated client out:
// each of its appends is answered 201 within a second while they are held, and the admin port's
// /healthz within a second throughout.
TEST_F(ApiHostileTest, SixHundredUnauthenticatedConnectionsLeaveAuthenticatedAppendsServed) {
  if (UnderSanitizer()) GTEST_SKIP() << "latency bounds: plain stage only";
  RaiseOpenFileLimit();
  ASSERT_NO_FATAL_FAILURE(StartWithToken());
  HealthProbe health(admin_port_);
  HostileClients hostile(api_port_, 600);
  ASSERT_TRUE(hostile.all_connected());
  // The listen backlog (512) overflows with 600 connections at once: the kernel hands the last
  // ones to the server a second or so later. The appends start after that and are spread over two
  // seconds, while the hostile clients keep every connection they lose coming back.
  std::this_thread::sleep_for(milliseconds(1500));
  const std::string auth = "Authorization: Bearer " + kToken;
  for (int i = 0; i < 20; ++i) {
    ApiAnswer answer =
        Append(R"({"i":")" + std::to_string(i) + R"("})", "application/json", {auth});
    EXPECT_EQ(answer.status, 201) << "append " << i << ": " << answer.body;
    EXPECT_LT(answer.took, seconds(1)) << "append " << i;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(Len("feed"), 20);
  EXPECT_GT(hostile.reconnects(), 0) << "the requests without the token were answered and closed";
  EXPECT_GT(health.polls(), 0);
  EXPECT_EQ(health.failures(), 0) << "slowest /healthz " << health.slowest().count() << " ms";
}

// Review F3 (slow_followers.py), issue 29: 60 followers that never read (4 KiB receive buffers)
// while about 6 MiB of 60 KiB entries are appended to a stream without an archive. Before the fix
// each held its whole catch-up page and its text (15 MiB -> 1,166 MiB with 80). Now the process
// stays under 256 MiB, a follower that reads gets every appended id once and in order, appends
// are answered 201 within a second and /healthz within a second throughout.
TEST_F(ApiHostileTest, SixtyStuckFollowersNeitherGrowMemoryNorSlowTheOthers) {
  if (UnderSanitizer()) GTEST_SKIP() << "a sanitizer's shadow memory makes RSS meaningless";
  ASSERT_NO_FATAL_FAILURE(StartApi("  - name: feed\n"));
  HealthProbe health(admin_port_);
  PeakResident resident(sidecar_->pid());
  std::string blob;
  for (int i = 0; i < 240; ++i) {
    for (int b = 0; b < 256; ++b) blob.push_back(static_cast<char>(b));  // 61,440 bytes, not UTF-8
  }
  std::vector<std::string> receipts;
  auto append = [&](const std::string& body, const std::string& content_type) {
    ApiAnswer answer = Append(body, content_type);
    EXPECT_EQ(answer.status, 201) << answer.body;
    EXPECT_LT(answer.took, seconds(1)) << "append " << receipts.size();
    receipts.push_back(JsonString(answer.body, "id"));
  };
  for (int i = 0; i < 50; ++i) append(blob, "application/octet-stream");

  Connections stuck;
  for (int i = 0; i < 60; ++i) {
    const int fd = ConnectTo(api_port_, 4096);
    ASSERT_GE(fd, 0) << "follower " << i;
    stuck.Add(fd);
    ASSERT_TRUE(SendAll(
        fd,
        "GET /v1/streams/feed/entries?follow=true&since=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  }
  SseFollower reader(api_port_, "/v1/streams/feed/entries?follow=true&since=0");
  for (int i = 0; i < 50; ++i) {
    append(blob, "application/octet-stream");
    if (i % 5 == 0) append(R"({"small":"1"})", "application/json");
  }
  EXPECT_TRUE(reader.WaitEvents(receipts.size(), seconds(15)))
      << reader.ids().size() << " of " << receipts.size();
  EXPECT_EQ(reader.status(), 200);
  EXPECT_EQ(reader.ids(), receipts);
  // The stuck followers are still there (the old server held each page for a 10 s write timeout).
  const auto until = Clock::now() + seconds(4);
  while (Clock::now() < until) {
    ApiAnswer answer = Append(R"({"late":"1"})", "application/json");
    EXPECT_EQ(answer.status, 201) << answer.body;
    EXPECT_LT(answer.took, seconds(1));
    std::this_thread::sleep_for(milliseconds(500));
  }
  resident.Stop();
  std::printf("60 stuck followers, %zu entries (about 6 MiB) appended: peak RSS %lld MiB\n",
              receipts.size(), static_cast<long long>(resident.peak_mib()));
  EXPECT_GT(resident.peak_mib(), 0);
  EXPECT_LT(resident.peak_mib(), 256);
  EXPECT_GT(health.polls(), 0);
  EXPECT_EQ(health.failures(), 0) << "slowest /healthz " << health.slowest().count() << " ms";
}

// Review F6, issue 29: without a token a web page in a browser on the same host could append with
// a cross-site text/plain POST. A request with an Origin header is refused (403) unless the origin
// is in api.allowed_origins (empty by default), and appends nothing; one without Origin is served.
TEST_F(ApiHostileTest, ARequestFromAnOriginNotAllowedIsRefusedAndAppendsNothing) {
  ASSERT_NO_FATAL_FAILURE(StartApi("  - name: feed\n"));
  const std::string refusal = R"({"error":"origin_not_allowed"})";
  for (const std::string& type : {std::string("application/json"), std::string("text/plain")}) {
    ApiAnswer cross = Append(R"({"a":"1"})", type, {"Origin: https://evil.example"});
    EXPECT_EQ(cross.status, 403) << type << ": " << cross.body;
    EXPECT_EQ(cross.body, refusal) << type;
  }
  EXPECT_EQ(Len("feed"), 0);
  ApiAnswer read =
      Exchange(api_port_, "GET", "/v1/streams/feed/entries", {"Origin: https://evil.example"});
  EXPECT_EQ(read.status, 403) << read.body;
  ApiAnswer plain = Append(R"({"a":"1"})", "application/json");
  EXPECT_EQ(plain.status, 201) << plain.body;
  EXPECT_EQ(Len("feed"), 1);
}

TEST_F(ApiHostileTest, AnOriginInAllowedOriginsIsServed) {
  ASSERT_NO_FATAL_FAILURE(
      StartApi("  - name: feed\n", "  allowed_origins: [\"https://app.example\"]\n"));
  ApiAnswer listed = Append(R"({"a":"1"})", "application/json", {"Origin: https://app.example"});
  EXPECT_EQ(listed.status, 201) << listed.body;
  ApiAnswer other = Append(R"({"a":"2"})", "application/json", {"Origin: https://evil.example"});
  EXPECT_EQ(other.status, 403) << other.body;
  ApiAnswer none = Append(R"({"a":"3"})", "application/json");
  EXPECT_EQ(none.status, 201) << none.body;
  EXPECT_EQ(Len("feed"), 2);
}

// Whether the binary's log (JSON lines) has a warning that names api.listen.
bool WarnsAboutApiListen(const std::string& log) {
  size_t at = 0;
  while (at < log.size()) {
    size_t end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(at, end - at);
    at = end + 1;
    if (line.find(R"("level":"warn")") != std::string::npos &&
        line.find("api.listen") != std::string::npos) {
      return true;
    }
  }
  return false;
}

// Review F6, issue 29: an api.listen reachable from other hosts without api.token_file lets any
// client on the network append and read; the binary says so at start. On loopback, or with a
// token, it does not.
TEST_F(ApiHostileTest, ANonLoopbackListenWithoutATokenIsWarnedAbout) {
  ASSERT_NO_FATAL_FAILURE(
      StartApi(LogApiConfig{.streams = "  - name: feed\n", .listen_host = "0.0.0.0"}));
  EXPECT_TRUE(WarnsAboutApiListen(sidecar_->Logs())) << sidecar_->Logs();
  EXPECT_EQ(Append(R"({"a":"1"})", "application/json").status, 201);
  sidecar_.reset();

  api_port_ = FreePort();
  ASSERT_NO_FATAL_FAILURE(StartApi("  - name: feed\n"));
  EXPECT_FALSE(WarnsAboutApiListen(sidecar_->Logs())) << sidecar_->Logs();
  sidecar_.reset();

  api_port_ = FreePort();
  const std::string token_path = WriteConfig(kToken + "\n");
  ASSERT_NO_FATAL_FAILURE(StartApi(LogApiConfig{.streams = "  - name: feed\n",
                                                .api_extra = "  token_file: " + token_path + "\n",
                                                .listen_host = "0.0.0.0"}));
  EXPECT_FALSE(WarnsAboutApiListen(sidecar_->Logs())) << sidecar_->Logs();
}

// Issue 29: the log API's thread count is a small constant whatever the number of connections and
// followers (it was one thread per connection). 300 idle keep-alive connections that were each
// served once, and 50 followers, add at most the Redis workers to the process: they start when
// requests wait for them and end when idle, so the baseline may have fewer of them
// (docs/architecture.md counts the rest, which are there from the start).
TEST_F(ApiHostileTest, TheThreadCountStaysConstantWithConnectionsAndFollowers) {
  RaiseOpenFileLimit();
  ASSERT_NO_FATAL_FAILURE(StartApi("  - name: feed\n"));
  // Whatever starts lazily (the follow hub, Redis connections) starts before the baseline.
  ASSERT_EQ(Append(R"({"a":"1"})", "application/json").status, 201);
  {
    SseFollower warm_up(api_port_, "/v1/streams/feed/entries?follow=true&since=0");
    ASSERT_TRUE(warm_up.WaitEvents(1, seconds(10)));
  }
  std::this_thread::sleep_for(seconds(1));
  const int baseline = ThreadCount(sidecar_->pid());
  ASSERT_GT(baseline, 0);

  Connections idle;
  for (int i = 0; i < 300; ++i) {
    const int fd = ConnectTo(api_port_);
    ASSERT_GE(fd, 0) << "connection " << i;
    idle.Add(fd);
    ASSERT_TRUE(SendAll(fd, "GET /v1/streams/feed/entries HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  }
  for (const int fd : idle.fds()) {
    std::string answer;
    bool closed = false;
    const auto deadline = Clock::now() + seconds(10);
    while (answer.find('}') == std::string::npos && !closed && Clock::now() < deadline) {
      ReadSome(fd, &answer, milliseconds(100), &closed);
    }
    ASSERT_TRUE(answer.starts_with("HTTP/1.1 200")) << answer;
  }
  std::vector<std::unique_ptr<SseFollower>> followers;
  followers.reserve(50);
  for (int i = 0; i < 50; ++i) {
    followers.push_back(
        std::make_unique<SseFollower>(api_port_, "/v1/streams/feed/entries?follow=true&since=0"));
  }
  for (const auto& follower : followers) ASSERT_TRUE(follower->WaitEvents(1, seconds(10)));
  const int loaded = ThreadCount(sidecar_->pid());
  EXPECT_LE(loaded - baseline, log::ApiServer::kWorkers)
      << baseline << " threads idle, " << loaded << " with 300 connections and 50 followers";
}

}  // namespace
}  // namespace streamcar::testing
