// The chaos suite: at-least-once with nothing lost, under crashes. A real redis-server with AOF
// (appendfsync always), a flaky handler, three sidecars, a producer, and at random: sidecars
// killed -9 and restarted (under the same name, or a new one as a Deployment does), Redis killed
// -9 and restarted, the handler going away. At the end: every produced id was answered 2xx or
// sits in the dead-letter stream, nothing is pending, and duplicates are counted and explained.
//
// Size: CHAOS_ENTRIES (default 2000) and CHAOS_SECONDS of chaos (default 45); CHAOS_SEED picks
// the random sequence (default: time). The figures print at the end.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tests/support/redis_server.h"
#include "tests/support/sidecar_process.h"
#include "tests/support/test_handler.h"

namespace streamcar::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : fallback;
}

// What the handler did, per entry id.
struct Ledger {
  std::mutex mutex;
  std::map<std::string, int> deliveries;   // every request
  std::map<std::string, int> answered_ok;  // 2xx answers
  int failures = 0, slow = 0;
};

struct Figures {
  int produced = 0, kills_same = 0, kills_new = 0, redis_restarts = 0, handler_outages = 0;
};

class Chaos {
 public:
  Chaos()
      : seed_(static_cast<unsigned>(EnvInt("CHAOS_SEED", static_cast<int>(time(nullptr))))),
        rng_(seed_) {}

  std::string SidecarYaml(const std::string& consumer, int admin_port) const {
    return "version: 1\nredis:\n  url: " + redis_->url() +
           "\n  connect_timeout: 1s\n  command_timeout: 2s\nconsumer:\n  name: " + consumer +
           "\nadmin:\n  listen: 127.0.0.1:" + std::to_string(admin_port) +
           "\nshutdown:\n  drain_timeout: 2s\nsubscriptions:\n"
           "  - stream: chaos\n    group: workers\n    start: beginning\n"
           "    handler: { url: \"" +
           handler_.url("/") +
           "\", timeout: 400ms, concurrency: 8 }\n"
           "    retry: { max_attempts: 8, initial_backoff: 50ms, max_backoff: 400ms }\n"
           "    claim: { min_idle: 2s, interval: 300ms }\n";
  }

  void StartSidecar(size_t slot, const std::string& consumer) {
    sidecars_[slot] = std::make_unique<SidecarProcess>(SidecarYaml(consumer, FreePort()));
  }

  unsigned seed_;
  std::mt19937 rng_;
  std::unique_ptr<RedisServer> redis_ =
      std::make_unique<RedisServer>(RedisServerOptions{.append_only = true});
  TestHandler handler_;
  std::vector<std::unique_ptr<SidecarProcess>> sidecars_{3};
  Ledger ledger_;
  Figures figures_;
};

// A producer that keeps trying through Redis restarts; returns the ids Redis confirmed.
std::vector<std::string> Produce(const RedisServer& redis, int count, milliseconds spread,
                                 std::atomic<int>* produced) {
  std::vector<std::string> ids;
  const auto pause = spread / std::max(1, count);
  std::unique_ptr<redis::Connection> connection;
  for (int i = 0; i < count; ++i) {
    while (true) {
      if (!connection || connection->broken()) {
        auto options = redis.ClientOptions();
        options.connect_timeout = Millis(500);
        auto opened = redis::Connection::Open(options);
        if (!opened.ok()) {
          std::this_thread::sleep_for(milliseconds(100));
          continue;
        }
        connection = std::move(*opened);
      }
      auto reply = connection->Run(redis::Command("XADD")
                                       .Arg("chaos")
                                       .Arg("*")
                                       .Arg("seq")
                                       .Arg(int64_t{i})
                                       .Arg("pad")
                                       .Arg(std::string(64, 'p')));
      if (reply.ok()) {
        ids.emplace_back(reply->view().Str());
        ++*produced;
        break;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    std::this_thread::sleep_for(pause);
  }
  return ids;
}

TEST(Chaos, NothingIsLostUnderCrashesAndRestarts) {
  Chaos chaos;
  const int entries = EnvInt("CHAOS_ENTRIES", 2000);
  const int chaos_seconds = EnvInt("CHAOS_SECONDS", 45);
  std::printf("chaos: seed %u, %d entries, %d s of chaos\n", chaos.seed_, entries, chaos_seconds);

  std::mt19937 handler_rng(chaos.seed_ + 1);
  std::mutex handler_rng_mutex;
  chaos.handler_.SetBehaviour([&](const ReceivedRequest& r) {
    const std::string id = r.Header("streamcar-id");
    int roll;
    {
      std::lock_guard lock(handler_rng_mutex);
      roll = static_cast<int>(handler_rng() % 100);
    }
    HandlerReply reply;
    std::lock_guard lock(chaos.ledger_.mutex);
    ++chaos.ledger_.deliveries[id];
    if (roll < 10) {  // 10%: a server error
      ++chaos.ledger_.failures;
      reply.status = 503;
      return reply;
    }
    if (roll < 15) {  // 5%: slower than the 400 ms timeout (the answer comes too late)
      ++chaos.ledger_.slow;
      reply.delay = milliseconds(600);
      reply.status = 503;
      return reply;
    }
    ++chaos.ledger_.answered_ok[id];
    return reply;
  });

  for (size_t slot = 0; slot < 3; ++slot) chaos.StartSidecar(slot, "pod-" + std::to_string(slot));

  std::atomic<int> produced{0};
  std::vector<std::string> ids;
  std::thread producer([&] {
    ids = Produce(*chaos.redis_, entries, seconds(std::max(1, chaos_seconds - 10)), &produced);
  });

  // Chaos: one disruption every 1.5-4 s.
  int next_name = 3;
  const auto chaos_end = std::chrono::steady_clock::now() + seconds(chaos_seconds);
  while (std::chrono::steady_clock::now() < chaos_end) {
    std::this_thread::sleep_for(milliseconds(1500 + chaos.rng_() % 2500));
    const int action = static_cast<int>(chaos.rng_() % 10);
    const size_t slot = chaos.rng_() % 3;
    if (action < 4) {  // kill -9 a sidecar, restart under the same name
      const std::string name = "pod-" + std::to_string(slot);
      chaos.sidecars_[slot]->Kill();
      chaos.StartSidecar(slot, name);
      ++chaos.figures_.kills_same;
    } else if (action < 7) {  // kill -9 a sidecar, replace it by a new pod name
      chaos.sidecars_[slot]->Kill();
      chaos.StartSidecar(slot, "pod-" + std::to_string(next_name++));
      ++chaos.figures_.kills_new;
    } else if (action < 9) {  // kill -9 Redis, restart it from its AOF
      chaos.redis_->Kill();
      std::this_thread::sleep_for(milliseconds(300 + chaos.rng_() % 700));
      chaos.redis_->Start();
      ++chaos.figures_.redis_restarts;
    } else {  // the handler goes away for a moment (connections refused and dropped)
      chaos.handler_.Stop();
      std::this_thread::sleep_for(milliseconds(500 + chaos.rng_() % 1000));
      chaos.handler_.Restart();
      ++chaos.figures_.handler_outages;
    }
  }
  producer.join();
  chaos.figures_.produced = produced;

  // Settle: the survivors finish everything, including what dead pods left pending.
  auto pending = [&] {
    auto c = chaos.redis_->Connect();
    if (!c) return int64_t{-1};
    auto reply = c->Run(redis::Command("XPENDING").Arg("chaos").Arg("workers"));
    return reply.ok() ? reply->view()[0].Integer() : int64_t{-1};
  };
  auto dead_letters = [&] {
    std::set<std::string> originals;
    auto reply = chaos.redis_->Run({"XRANGE", "chaos:dlq", "-", "+"});
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      auto fields = reply.view()[i][1];
      for (size_t k = 0; k + 1 < fields.Size(); k += 2) {
        if (fields[k].Str() == "streamcar.id") originals.emplace(fields[k + 1].Str());
      }
    }
    return originals;
  };
  auto lost = [&] {
    std::set<std::string> dlq = dead_letters();
    std::lock_guard lock(chaos.ledger_.mutex);
    std::vector<std::string> missing;
    for (const auto& id : ids) {
      if (!chaos.ledger_.answered_ok.count(id) && !dlq.count(id)) missing.push_back(id);
    }
    return missing;
  };
  const bool settled = Eventually([&] { return pending() == 0 && lost().empty(); }, seconds(90));
  const auto missing = lost();
  const auto dlq = dead_letters();

  // Duplicates: deliveries beyond the first 2xx of an entry, and the ways they arise.
  int total_ok = 0, duplicate_ok = 0, deliveries = 0, retried_entries = 0, extra = 0;
  {
    std::lock_guard lock(chaos.ledger_.mutex);
    // Entries the producer did not count: a retried XADD whose first try had landed before Redis
    // died (its reply was lost). They are delivered like any other.
    const std::set<std::string> produced_ids(ids.begin(), ids.end());
    for (const auto& [id, n] : chaos.ledger_.answered_ok) extra += produced_ids.count(id) ? 0 : 1;
    for (const auto& [id, n] : chaos.ledger_.answered_ok) {
      total_ok += n;
      duplicate_ok += n - 1;
    }
    for (const auto& [id, n] : chaos.ledger_.deliveries) {
      deliveries += n;
      if (n > 1) ++retried_entries;
    }
  }
  std::printf(
      "chaos: produced %d | sidecar kills -9: %d restarted under the same name, %d replaced by a "
      "new name | redis kill -9 + restart: %d | handler outages: %d\n",
      chaos.figures_.produced, chaos.figures_.kills_same, chaos.figures_.kills_new,
      chaos.figures_.redis_restarts, chaos.figures_.handler_outages);
  std::printf(
      "chaos: lost %zu | pending at the end %lld | dead-lettered %zu | deliveries %d (503s %d, too "
      "slow %d) | 2xx answers %d, of which duplicates %d (an entry answered 2xx more than once: "
      "its "
      "acknowledgement died with a killed sidecar or a Redis restart, or the handler's answer was "
      "cut off by an outage)\n",
      missing.size(), static_cast<long long>(pending()), dlq.size(), deliveries,
      chaos.ledger_.failures, chaos.ledger_.slow, total_ok, duplicate_ok);

  EXPECT_TRUE(settled);
  EXPECT_EQ(missing.size(), 0u) << "first lost id: " << (missing.empty() ? "" : missing.front());
  EXPECT_EQ(pending(), 0);
  EXPECT_EQ(chaos.figures_.produced, entries);
  for (auto& sidecar : chaos.sidecars_) {
    // One may have been restarted a moment ago: let it start before asking it to stop.
    Eventually([&] { return sidecar->Logs().find("streamcar started") != std::string::npos; },
               seconds(10));
    sidecar->Terminate();
    auto code = sidecar->Wait(seconds(10));
    EXPECT_TRUE(code.has_value() && *code == 0) << sidecar->Logs().substr(0, 2000);
  }
}

}  // namespace
}  // namespace streamcar::testing
