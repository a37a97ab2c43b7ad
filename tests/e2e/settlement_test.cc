// Settlement after the handler's answer (SPEC 3.2, 3.3, 4.2, 4.3, 4.5) through the real binary and
// a real redis-server: a dead letter never acknowledges an entry it did not write, an error
// reply is "unknown" and never "gone", a lease lost to a peer is never taken back, shutdown never
// counts an attempt, and a reply lost with a connection is recovered at once.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

class SettlementTest : public E2eTest {
 protected:
  // [consumer, delivery count] of `id` in the group's PEL; consumer "" when not pending.
  std::pair<std::string, int64_t> OwnerOf(const std::string& id,
                                          const std::string& stream = "orders",
                                          const std::string& group = "billing") {
    auto reply = redis_->Run({"XPENDING", stream, group, id, id, "1"});
    if (reply.view().Size() == 0) return {"", 0};
    return {std::string(reply.view()[0][1].Str()), reply.view()[0][3].Integer()};
  }

  std::unique_ptr<SidecarProcess> StartWithYaml(const std::string& yaml) {
    return std::make_unique<SidecarProcess>(yaml);
  }

  static std::string Replace(std::string text, const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  }
};

// SPEC 3.3: a dead-letter key of another type is a loud exit 1 at start, like WRONGTYPE on the
// source stream.
TEST_F(SettlementTest, DeadLetterKeyOfAnotherTypeAtStartIsExitOne) {
  redis_->Run({"RPUSH", "orders:dlq", "left by an older worker"});
  auto sidecar = StartSidecar({});
  sidecar->ExpectExit(1);
  auto code = sidecar->Wait(seconds(15));
  ASSERT_TRUE(code.has_value()) << sidecar->Logs();
  EXPECT_EQ(*code, 1);
  EXPECT_NE(sidecar->Logs().find("orders:dlq"), std::string::npos) << sidecar->Logs();
  EXPECT_EQ(redis_->Run({"TYPE", "orders:dlq"}).view().Str(), "list");  // left untouched
}

// SPEC 3.3: the XACK runs only if the XADD succeeded. MULTI/EXEC acknowledged the entry although
// the dead letter failed with WRONGTYPE: the entry was gone.
TEST_F(SettlementTest, DeadLetterKeyThatChangesTypeWhileRunningLosesNothing) {
  handler_.SetBehaviour([](const ReceivedRequest&) { return HandlerReply{422, "bad"}; });
  auto sidecar = StartSidecar({});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  redis_->Run({"SET", "orders:dlq", "not a stream"});
  std::string id = Add({"k", "v"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
  ASSERT_TRUE(WaitMetric("streamcar_settle_failures_total", {"class=\"definite\""}, 1))
      << sidecar->Logs();
  EXPECT_EQ(OwnerOf(id).first, "c1");  // still pending: nothing acknowledged
  EXPECT_EQ(Metric("streamcar_acked_total"), 0);
  // The key is fixed: the held entry is dead-lettered without another POST.
  redis_->Run({"DEL", "orders:dlq"});
  ASSERT_TRUE(
      Eventually([&] { return Len("orders:dlq") == 1 && PendingCount() == 0; }, seconds(15)))
      << sidecar->Logs();
  EXPECT_EQ(RequestsFor(id).size(), 1u);
  EXPECT_EQ(Metric("streamcar_dead_lettered_total", {"reason=\"rejected\""}), 1);
}

// SPEC 3.2: an error reply to a retry claim means "unknown", never "gone". It was read as gone:
// the entry was acknowledged after one failed delivery, without a 2xx or a dead letter.
TEST_F(SettlementTest, ErrorReplyToARetryClaimKeepsTheEntry) {
  redis_->Run({"ACL", "SETUSER", "sc", "on", ">pw", "~*", "&*", "+@all", "-xclaim"});
  std::atomic<int> calls{0};
  handler_.SetBehaviour(
      [&](const ReceivedRequest&) { return HandlerReply{++calls == 1 ? 500 : 200}; });
  const std::string url = "redis://sc:pw@127.0.0.1:" + std::to_string(redis_->port()) + "/0";
  auto sidecar = StartWithYaml(Replace(Yaml({}), redis_->url(), url));
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  std::string id = Add({"k", "v"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
  ASSERT_TRUE(WaitMetric("streamcar_settle_failures_total", {"class=\"definite\""}, 1))
      << sidecar->Logs();
  EXPECT_EQ(OwnerOf(id).first, "c1");
  EXPECT_EQ(Metric("streamcar_acked_total"), 0);
  EXPECT_EQ(Metric("streamcar_deleted_entries_total"), 0);
  // The permission comes back: the retry is claimed (attempt 2) and succeeds.
  redis_->Run({"ACL", "SETUSER", "sc", "+xclaim"});
  ASSERT_TRUE(Eventually([&] { return RequestsFor(id).size() == 2; }, seconds(15)))
      << sidecar->Logs();
  EXPECT_EQ(RequestsFor(id)[1].Header("streamcar-attempts"), "2");
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10)));
  EXPECT_EQ(Len("orders:dlq"), 0);
}

// SPEC 3.2: the keepalive never takes an entry back from a consumer that reclaimed it; the
// result of the lost entry is dropped unless it is a 2xx, and it is never delivered again here.
TEST_F(SettlementTest, KeepaliveNeverTakesBackAReclaimedEntry) {
  handler_.SetBehaviour([](const ReceivedRequest&) {
    HandlerReply reply{503, "busy"};
    reply.delay = milliseconds(2500);
    return reply;
  });
  SidecarConfig c;
  c.min_idle = "600ms";  // a keepalive every 200 ms
  c.claim_interval = "60s";
  c.handler_extra = "timeout: 10s";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  std::string id = Add({"k", "v"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
  // A peer reclaims it (as after a pause of this sidecar longer than min_idle).
  ASSERT_EQ(redis_->Run({"XCLAIM", "orders", "billing", "peer", "0", id, "JUSTID"}).view().Size(),
            1u);
  ASSERT_TRUE(WaitMetric("streamcar_settle_failures_total", {"class=\"lost_lease\""}, 1))
      << sidecar->Logs();
  // Well past several keepalives and the 503 answer: still the peer's, never re-delivered here.
  std::this_thread::sleep_for(milliseconds(3500));
  EXPECT_EQ(OwnerOf(id).first, "peer");
  EXPECT_EQ(OwnerOf(id).second, 1);  // our retry claim did not count a delivery
  EXPECT_EQ(RequestsFor(id).size(), 1u);
  EXPECT_EQ(Len("orders:dlq"), 0);
}

TEST_F(SettlementTest, ALostLeaseStillAcknowledgesA2xx) {
  handler_.SetBehaviour([](const ReceivedRequest&) {
    HandlerReply reply;
    reply.delay = milliseconds(1500);
    return reply;
  });
  SidecarConfig c;
  c.min_idle = "600ms";
  c.claim_interval = "60s";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  std::string id = Add({"k", "v"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
  redis_->Run({"XCLAIM", "orders", "billing", "peer", "0", id, "JUSTID"});
  ASSERT_TRUE(WaitMetric("streamcar_settle_failures_total", {"class=\"lost_lease\""}, 1))
      << sidecar->Logs();
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10))) << sidecar->Logs();
  EXPECT_EQ(RequestsFor(id).size(), 1u);
}

// SPEC 3.2: no retry claim once shutdown has begun. A retry that fell due during the drain was
// claimed: its delivery count grew although it was never POSTed again.
TEST_F(SettlementTest, NoRetryClaimOnceShutdownBegan) {
  handler_.SetBehaviour([](const ReceivedRequest& r) {
    if (r.body.find("\"slow\"") != std::string::npos) {
      HandlerReply reply;
      reply.delay = milliseconds(3000);
      return reply;
    }
    return HandlerReply{500, "fails"};
  });
  SidecarConfig c;
  c.initial_backoff = "1s";
  c.handler_extra = "concurrency: 2, timeout: 10s";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  std::string failing = Add({"fail", "1"});
  Add({"slow", "1"});
  ASSERT_TRUE(handler_.WaitForCount(2, seconds(10))) << sidecar->Logs();
  sidecar->Terminate();
  auto code = sidecar->Wait(seconds(20));
  ASSERT_TRUE(code.has_value()) << sidecar->Logs();
  EXPECT_EQ(*code, 0) << sidecar->Logs();
  EXPECT_EQ(RequestsFor(failing).size(), 1u);
  EXPECT_EQ(OwnerOf(failing), (std::pair<std::string, int64_t>{"c1", 1}));
}

// SPEC 4.2: a group re-creation that fails is retried with a growing delay. It was retried at
// once, about 21,000 times a second.
TEST_F(SettlementTest, ReCreatingAGroupThatKeepsFailingBacksOff) {
  auto sidecar = StartSidecar({});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  // XGROUP CREATE ... MKSTREAM is refused while memory is full.
  redis_->Run({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  redis_->Run({"CONFIG", "SET", "maxmemory", "1"});
  redis_->Run({"CONFIG", "RESETSTAT"});
  redis_->Run({"XGROUP", "DESTROY", "orders", "billing"});
  std::this_thread::sleep_for(milliseconds(3000));
  auto stats = std::string(redis_->Run({"INFO", "commandstats"}).view().Str());
  redis_->Run({"CONFIG", "SET", "maxmemory", "0"});
  // Refused commands count as rejected_calls, not calls.
  auto stat = [&](const std::string& name) {
    const auto line = stats.find("cmdstat_xgroup|create:");
    const auto at = stats.find(name + "=", line);
    return line == std::string::npos || at == std::string::npos
               ? 0L
               : std::stol(stats.substr(at + name.size() + 1));
  };
  const long tries = stat("calls") + stat("rejected_calls");
  EXPECT_LT(tries, 40) << stats;
  EXPECT_GE(tries, 2) << stats;
  // Memory again: the group comes back and delivery goes on.
  std::string id = Add({"k", "v"});
  ASSERT_TRUE(Eventually([&] { return RequestsFor(id).size() == 1; }, seconds(15)))
      << sidecar->Logs();
}

// SPEC 4.5: no new reads after SIGTERM, in any subscription. Subscriptions stopped one after
// another, so a later one went on reading and POSTing while an earlier one's reader was joined.
TEST_F(SettlementTest, EverySubscriptionStopsAtOnce) {
  handler_.SetBehaviour([](const ReceivedRequest& r) {
    HandlerReply reply;
    if (r.Header("streamcar-stream") == "orders") reply.delay = milliseconds(2000);
    return reply;
  });
  std::string yaml = Yaml({}) + "  - stream: other\n    group: billing\n    start: beginning\n" +
                     "    handler: { url: \"" + handler_.url("/") + "\" }\n";
  auto sidecar = StartWithYaml(yaml);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  Add({"k", "v"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar->Logs();
  sidecar->Terminate();
  // Shutdown has begun (readiness is withdrawn just before intake stops); the slow request keeps
  // the process draining meanwhile.
  ASSERT_TRUE(
      Eventually([&] { return sidecar->running() && HttpGet(admin_port_, "/readyz").first == 503; },
                 seconds(5)))
      << sidecar->Logs();
  std::this_thread::sleep_for(milliseconds(50));
  std::string late = Add({"late", "1"}, "other");
  auto code = sidecar->Wait(seconds(20));
  ASSERT_TRUE(code.has_value()) << sidecar->Logs();
  EXPECT_EQ(*code, 0) << sidecar->Logs();
  EXPECT_TRUE(RequestsFor(late).empty());
  // Read or not, it keeps the delivery count it had: none.
  EXPECT_EQ(OwnerOf(late, "other").second, 0);
}

// A TCP proxy in front of Redis that can lose one reply: it closes both sides instead of
// forwarding the first server reply that contains `marker`.
class LossyProxy {
 public:
  explicit LossyProxy(int redis_port) : redis_port_(redis_port), port_(FreePort()) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address = Loopback(port_);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0)
        << "proxy port " << port_;
    EXPECT_EQ(::listen(listener_, 64), 0);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~LossyProxy() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    acceptor_.join();
    std::lock_guard lock(mutex_);
    for (auto& pump : pumps_) pump.join();
  }
  int port() const { return port_; }
  void LoseReplyContaining(std::string marker) {
    std::lock_guard lock(mutex_);
    marker_ = std::move(marker);
  }
  bool lost() const { return lost_; }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    return address;
  }
  void Accept() {
    while (!stop_) {
      int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) return;
      int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in address = Loopback(redis_port_);
      if (::connect(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        ::close(client);
        ::close(server);
        continue;
      }
      std::lock_guard lock(mutex_);
      pumps_.emplace_back([this, client, server] { Pump(client, server); });
    }
  }
  void Pump(int client, int server) {
    char buffer[65536];
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    while (!stop_) {
      if (::poll(fds, 2, 100) <= 0) continue;
      for (int side = 0; side < 2; ++side) {
        if (fds[side].revents == 0) continue;
        const ssize_t n = ::recv(fds[side].fd, buffer, sizeof(buffer), 0);
        if (n <= 0) goto done;
        if (side == 1 && ShouldLose(std::string_view(buffer, static_cast<size_t>(n)))) goto done;
        if (::send(fds[1 - side].fd, buffer, static_cast<size_t>(n), MSG_NOSIGNAL) != n) goto done;
      }
    }
  done:
    ::close(client);
    ::close(server);
  }
  bool ShouldLose(std::string_view reply) {
    std::lock_guard lock(mutex_);
    if (marker_.empty() || reply.find(marker_) == std::string_view::npos) return false;
    marker_.clear();
    lost_ = true;
    return true;
  }

  int redis_port_;
  int port_;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> lost_{false};
  std::mutex mutex_;
  std::string marker_;
  std::thread acceptor_;
  std::vector<std::thread> pumps_;
};

// A read whose reply is lost with its connection leaves the entries pending for this consumer
// and held by nobody. They were only found by the reclaim beat after claim.min_idle (here 60 s);
// after the reconnect the own pending list is read again and they are delivered at once.
TEST_F(SettlementTest, EntriesOfALostReadReplyAreDeliveredAfterTheReconnect) {
  LossyProxy proxy(redis_->port());
  const std::string url = "redis://127.0.0.1:" + std::to_string(proxy.port()) + "/0";
  auto sidecar = StartWithYaml(Replace(Yaml({}), redis_->url(), url));
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  proxy.LoseReplyContaining("lost-in-transit");
  std::string id = Add({"marker", "lost-in-transit"});
  ASSERT_TRUE(Eventually([&] { return proxy.lost(); }, seconds(10))) << sidecar->Logs();
  ASSERT_TRUE(Eventually([&] { return RequestsFor(id).size() == 1; }, seconds(15)))
      << sidecar->Logs();
  EXPECT_EQ(RequestsFor(id)[0].Header("streamcar-attempts"), "1");
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10))) << sidecar->Logs();
}

// SPEC 4.3 "definite" by a full memory: the dead letter's XADD is refused with OOM (maxmemory,
// noeviction). Nothing was written and nothing acknowledged: the entry stays held and pending,
// the step is retried with backoff and counted each time, and once memory is back the dead
// letter is written exactly once, without another POST.
TEST_F(SettlementTest, ADeadLetterRefusedForMemoryIsRetriedUntilWrittenOnce) {
  std::atomic<bool> answer{false};
  std::atomic<bool> arrived{false};
  handler_.SetBehaviour([&](const ReceivedRequest&) {
    arrived = true;  // the handler records a request only once this returns
    const auto give_up = std::chrono::steady_clock::now() + seconds(20);
    while (!answer && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    return HandlerReply{422, "bad"};
  });
  auto sidecar = StartSidecar({});
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  std::string id = Add({"k", "v"});
  ASSERT_TRUE(Eventually([&] { return arrived.load(); }, seconds(10))) << sidecar->Logs();
  // Memory is full before the answer: the XADD of the dead letter is refused.
  redis_->Run({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  redis_->Run({"CONFIG", "SET", "maxmemory", "1"});
  answer = true;
  // Refused, and tried again while the entry is held: counted each time.
  ASSERT_TRUE(WaitMetric("streamcar_settle_failures_total", {"class=\"definite\""}, 2, seconds(20)))
      << sidecar->Logs();
  EXPECT_EQ(OwnerOf(id).first, "c1");  // still pending: nothing acknowledged
  EXPECT_EQ(Len("orders:dlq"), 0);
  EXPECT_EQ(Metric("streamcar_acked_total"), 0);
  EXPECT_NE(sidecar->Logs().find("\"class\":\"definite\""), std::string::npos) << sidecar->Logs();
  // Memory is back: the held entry is dead-lettered, once, and leaves the pending list.
  redis_->Run({"CONFIG", "SET", "maxmemory", "0"});
  ASSERT_TRUE(
      Eventually([&] { return Len("orders:dlq") == 1 && PendingCount() == 0; }, seconds(20)))
      << sidecar->Logs();
  EXPECT_EQ(RequestsFor(id).size(), 1u);
  EXPECT_EQ(Metric("streamcar_dead_lettered_total", {"reason=\"rejected\""}), 1);
  auto letters = DeadLetters();
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].Get("streamcar.id"), id);
  EXPECT_EQ(letters[0].Get("streamcar.reason"), "rejected");
  EXPECT_EQ(Len("orders"), 1);  // the entry itself is still in the stream: nothing lost
}

// SPEC 4.3 "ambiguous" by a crash: redis-server is killed (SIGKILL) while an acknowledgement is
// on the wire, and restarted on its port from its append-only file (appendfsync always). The
// kill is made to hit a flush: writes are paused first, so the XACK of the answers given then
// waits at the server until the kill, and the test sees it waiting (CLIENT LIST) before it
// kills. The command timeout is long, so the failure is the connection's, not a timeout.
// Afterwards every entry is acknowledged (none lost), the ones acknowledged before the crash
// are not delivered again, and the pending list brings back the rest at once (not after
// claim.min_idle, 60 s here).
TEST_F(SettlementTest, ARedisKilledMidFlushIsAmbiguousAndLosesNothing) {
  redis_ = std::make_unique<RedisServer>(RedisServerOptions{.append_only = true});
  constexpr int kFirst = 40;
  constexpr int kSecond = 40;
  std::vector<std::string> first, second;
  for (int i = 0; i < kFirst; ++i) first.push_back(Add({"first", std::to_string(i)}));
  for (int i = 0; i < kSecond; ++i) second.push_back(Add({"second", std::to_string(i)}));
  std::atomic<bool> gate{false};
  std::atomic<int> waiting{0};
  handler_.SetBehaviour([&](const ReceivedRequest& r) {
    if (r.body.find("\"second\"") != std::string::npos) {
      ++waiting;  // the handler records a request only once this returns
      const auto give_up = std::chrono::steady_clock::now() + seconds(30);
      while (!gate && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(milliseconds(10));
      }
    }
    return HandlerReply{};
  });
  SidecarConfig c;
  c.handler_extra = "concurrency: 4";
  auto sidecar = StartWithYaml(Replace(Yaml(c), "command_timeout: 2s", "command_timeout: 30s"));
  // The first entries are answered and acknowledged; the second ones wait in the handler.
  ASSERT_TRUE(WaitMetric("streamcar_acked_total", {}, kFirst, seconds(20))) << sidecar->Logs();
  ASSERT_TRUE(Eventually([&] { return waiting.load() >= 1; }, seconds(10))) << sidecar->Logs();
  EXPECT_EQ(Metric("streamcar_acked_total"), kFirst);
  redis_->Run({"CLIENT", "PAUSE", "60000", "WRITE"});
  gate = true;
  // Held by the pause: a client blocked (flags=b) on an XACK. `cmd` alone names a client's last
  // command, which is an XACK of the first entries as soon as they are acknowledged.
  ASSERT_TRUE(Eventually(
      [&] {
        std::istringstream clients(std::string(redis_->Run({"CLIENT", "LIST"}).view().Str()));
        for (std::string line; std::getline(clients, line);) {
          if (line.find(" flags=b ") != std::string::npos &&
              line.find(" cmd=xack") != std::string::npos) {
            return true;
          }
        }
        return false;
      },
      seconds(10)))
      << "no acknowledgement waiting at the server\n"
      << sidecar->Logs();
  redis_->Kill();
  redis_->Start();
  ASSERT_TRUE(
      WaitMetric("streamcar_settle_failures_total", {"class=\"ambiguous\""}, 1, seconds(20)))
      << sidecar->Logs();
  EXPECT_NE(sidecar->Logs().find("\"class\":\"ambiguous\""), std::string::npos) << sidecar->Logs();
  // Nothing lost: every entry answered with a 2xx and acknowledged.
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& id : second) {
          if (RequestsFor(id).empty()) return false;
        }
        return PendingCount() == 0;
      },
      seconds(30)))
      << sidecar->Logs();
  EXPECT_EQ(Len("orders"), kFirst + kSecond);
  EXPECT_EQ(Len("orders:dlq"), 0);
  for (const auto& id : first) EXPECT_EQ(RequestsFor(id).size(), 1u) << id;
  EXPECT_TRUE(sidecar->running()) << sidecar->Logs();
}

}  // namespace
}  // namespace streamcar::testing
