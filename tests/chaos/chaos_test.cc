// The chaos suite: at-least-once with nothing lost, under crashes. A real redis-server with AOF
// (appendfsync always), a flaky handler, three sidecars, a producer, and at random: sidecars
// killed -9 and restarted (under the same name, or a new one as a Deployment does), Redis killed
// -9 and restarted, the handler going away; in the pause variant, sidecars frozen with SIGSTOP for
// longer than claim.min_idle and then continued (a GC pause, a throttled container).
//
// At the end: every entry in the stream was answered 2xx or sits in the dead-letter stream with
// reason max_attempts after its attempts; nothing is pending; dead letters and duplicate 2xx
// answers stay within bounds that the disruptions explain; no sidecar exited without the test
// killing it; and (pause variant) no entry went back to a sidecar that had lost it while the
// sidecar that took it was alive and running.
//
// Size: CHAOS_ENTRIES (default 2000; 600 for the pause variant) and CHAOS_SECONDS of chaos
// (default 45; 25); CHAOS_SEED picks the random sequence (default: time). Figures print at the end.

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
using Clock = std::chrono::steady_clock;

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : fallback;
}

constexpr int kMaxAttempts = 8;
constexpr int kCapacity = 8 * 4;  // concurrency x 4: what one sidecar holds at most

// One delivery as the handler saw it: which sidecar (its handler path) and when.
struct Delivery {
  std::string pod;
  int attempts = 0;
  Clock::time_point at;
};

// What the handler did, per entry id.
struct Ledger {
  std::mutex mutex;
  std::map<std::string, std::vector<Delivery>> deliveries;  // every request
  std::map<std::string, int> answered_ok;                   // 2xx answers
  int failures = 0, slow = 0;
};

struct Figures {
  int kills_same = 0, kills_new = 0, redis_restarts = 0, handler_outages = 0, pauses = 0;
  int disruptions() const {
    return kills_same + kills_new + redis_restarts + handler_outages + pauses;
  }
};

// A time when a sidecar could not act (paused, or killed and not yet replaced).
struct Absence {
  Clock::time_point from, to;
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
           handler_.url("/" + consumer) +
           "\", timeout: 400ms, concurrency: 8 }\n"
           "    retry: { max_attempts: " +
           std::to_string(kMaxAttempts) +
           ", initial_backoff: 50ms, max_backoff: 400ms }\n"
           "    claim: { min_idle: 2s, interval: 300ms }\n";
  }

  void StartSidecar(size_t slot, const std::string& consumer) {
    // A pod's uid goes with its name (SPEC 4.7): a restart under the same name is the same
    // pod's container restarting, which takes its consumer name's lease at once.
    sidecars_[slot] = std::make_unique<SidecarProcess>(
        SidecarYaml(consumer, FreePort()), std::vector<std::string>{"POD_UID=uid-of-" + consumer});
    names_[slot] = consumer;
  }

  // SIGKILL a sidecar on purpose. A sidecar that had already exited by itself is a failure.
  void KillSidecar(size_t slot) {
    if (auto code = sidecars_[slot]->Kill()) {
      unexpected_exits_.push_back(names_[slot] + " exited with " + std::to_string(*code) +
                                  " before the test killed it:\n" +
                                  sidecars_[slot]->Logs().substr(0, 4000));
    }
    absences_[names_[slot]].push_back({Clock::now(), Clock::time_point::max()});
  }

  // Every sidecar must still run (the test stops them; they never stop by themselves).
  void CheckAlive() {
    for (size_t slot = 0; slot < sidecars_.size(); ++slot) {
      if (!sidecars_[slot]->running()) {
        auto code = sidecars_[slot]->Wait(milliseconds(0));
        unexpected_exits_.push_back(names_[slot] + " exited with " +
                                    std::to_string(code.value_or(-1)) + " on its own:\n" +
                                    sidecars_[slot]->Logs().substr(0, 4000));
        sidecars_[slot]->ExpectExit(code.value_or(-1));  // reported above, once
        StartSidecar(slot, names_[slot]);
      }
    }
  }

  unsigned seed_;
  std::mt19937 rng_;
  std::unique_ptr<RedisServer> redis_ =
      std::make_unique<RedisServer>(RedisServerOptions{.append_only = true});
  TestHandler handler_;
  Ledger ledger_;
  Figures figures_;
  std::vector<std::string> unexpected_exits_;
  std::map<std::string, std::vector<Absence>> absences_;  // per consumer name
  std::vector<std::string> names_{3};
  // Last: destroyed first, while Redis and the handler still serve their drain.
  std::vector<std::unique_ptr<SidecarProcess>> sidecars_{3};
};

// A producer that keeps trying through Redis restarts; returns the ids Redis confirmed.
std::vector<std::string> Produce(const RedisServer& redis, int count, milliseconds spread) {
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
      if (reply.ok() && !reply->IsError()) {
        ids.emplace_back(reply->view().Str());
        break;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    std::this_thread::sleep_for(pause);
  }
  return ids;
}

struct ChaosOptions {
  int entries;
  int seconds;
  bool pauses;  // SIGSTOP/SIGCONT instead of kills and restarts
};

void RunChaos(const ChaosOptions& options) {
  Chaos chaos;
  std::printf("chaos: seed %u, %d entries, %d s of chaos%s\n", chaos.seed_, options.entries,
              options.seconds, options.pauses ? ", SIGSTOP pauses" : "");

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
    chaos.ledger_.deliveries[id].push_back(
        {r.path.substr(1), std::atoi(r.Header("streamcar-attempts").c_str()), r.at});
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

  std::vector<std::string> ids;
  std::thread producer([&] {
    ids = Produce(*chaos.redis_, options.entries, seconds(std::max(1, options.seconds - 10)));
  });

  // Chaos: one disruption every 1.5-4 s.
  int next_name = 3;
  const auto chaos_end = Clock::now() + seconds(options.seconds);
  while (Clock::now() < chaos_end) {
    std::this_thread::sleep_for(milliseconds(1500 + chaos.rng_() % 2500));
    chaos.CheckAlive();
    const int action = static_cast<int>(chaos.rng_() % 10);
    const size_t slot = chaos.rng_() % 3;
    if (options.pauses) {
      if (action < 8) {  // frozen for longer than claim.min_idle (2 s): peers reclaim its work
        const auto from = Clock::now();
        chaos.sidecars_[slot]->Pause();
        std::this_thread::sleep_for(milliseconds(2500 + chaos.rng_() % 2500));
        chaos.sidecars_[slot]->Resume();
        chaos.absences_[chaos.names_[slot]].push_back({from, Clock::now()});
        ++chaos.figures_.pauses;
      } else {  // the handler goes away for a moment
        chaos.handler_.Stop();
        std::this_thread::sleep_for(milliseconds(500 + chaos.rng_() % 1000));
        chaos.handler_.Restart();
        ++chaos.figures_.handler_outages;
      }
      continue;
    }
    if (action < 4) {  // kill -9 a sidecar, restart under the same name
      const std::string name = chaos.names_[slot];
      chaos.KillSidecar(slot);
      chaos.StartSidecar(slot, name);
      ++chaos.figures_.kills_same;
    } else if (action < 7) {  // kill -9 a sidecar, replace it by a new pod name
      chaos.KillSidecar(slot);
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
  chaos.CheckAlive();

  // Every entry the stream holds (the producer's, plus any XADD whose reply a Redis restart cut
  // off and that the producer therefore wrote again).
  auto stream_ids = [&] {
    std::vector<std::string> all;
    auto reply = chaos.redis_->Run({"XRANGE", "chaos", "-", "+"});
    for (size_t i = 0; i < reply.view().Size(); ++i) all.emplace_back(reply.view()[i][0].Str());
    return all;
  };
  auto pending = [&] {
    auto reply = chaos.redis_->RunAllowingError({"XPENDING", "chaos", "workers"});
    return reply.IsError() ? int64_t{-1} : reply.view()[0].Integer();
  };
  struct Letter {
    std::string reason;
    int attempts;
  };
  auto dead_letters = [&] {
    std::map<std::string, Letter> originals;
    auto reply = chaos.redis_->Run({"XRANGE", "chaos:dlq", "-", "+"});
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      auto fields = reply.view()[i][1];
      std::string id, reason, attempts;
      for (size_t k = 0; k + 1 < fields.Size(); k += 2) {
        if (fields[k].Str() == "streamcar.id") id = fields[k + 1].Str();
        if (fields[k].Str() == "streamcar.reason") reason = fields[k + 1].Str();
        if (fields[k].Str() == "streamcar.attempts") attempts = fields[k + 1].Str();
      }
      originals[id] = {reason, std::atoi(attempts.c_str())};
    }
    return originals;
  };
  auto lost = [&] {
    const auto dlq = dead_letters();
    const auto all = stream_ids();
    std::lock_guard lock(chaos.ledger_.mutex);
    std::vector<std::string> missing;
    for (const auto& id : all) {
      if (!chaos.ledger_.answered_ok.count(id) && !dlq.count(id)) missing.push_back(id);
    }
    return missing;
  };
  const bool settled = Eventually([&] { return pending() == 0 && lost().empty(); }, seconds(90));
  chaos.CheckAlive();
  const auto missing = lost();
  const auto dlq = dead_letters();
  const auto all = stream_ids();

  // Every id the producer was told about is in the stream; anything more is a re-sent XADD.
  const std::set<std::string> in_stream(all.begin(), all.end());
  size_t not_in_stream = 0;
  for (const auto& id : ids) not_in_stream += in_stream.count(id) ? 0 : 1;
  const size_t resent = all.size() - (ids.size() - not_in_stream);

  // Duplicates: 2xx answers beyond the first for an entry.
  int total_ok = 0, duplicate_ok = 0, deliveries = 0;
  std::vector<std::string> flips;
  {
    std::lock_guard lock(chaos.ledger_.mutex);
    for (const auto& [id, n] : chaos.ledger_.answered_ok) {
      total_ok += n;
      duplicate_ok += n - 1;
    }
    for (const auto& [id, list] : chaos.ledger_.deliveries) {
      deliveries += static_cast<int>(list.size());
      // Ownership flipping back: pod A delivers, pod B delivers later (it reclaimed the entry),
      // then A delivers again although B was neither paused nor killed in between: A took the
      // entry back from a live owner (SPEC 3.2: the keepalive and the retry claim check the
      // owner).
      for (size_t j = 1; j < list.size(); ++j) {
        for (size_t k = j + 1; k < list.size(); ++k) {
          if (list[k].pod == list[j].pod) break;  // B still owned it at k
          bool a_had_it = false;
          for (size_t i = 0; i < j; ++i) a_had_it = a_had_it || list[i].pod == list[k].pod;
          if (!a_had_it || list[k].pod == list[j].pod) continue;
          bool b_absent = false;
          for (const auto& gap : chaos.absences_[list[j].pod])
            b_absent = b_absent || (gap.from < list[k].at && gap.to > list[j].at);
          if (!b_absent) {
            flips.push_back(id + ": " + list[k].pod + " delivered it (attempts " +
                            std::to_string(list[k].attempts) + ") after " + list[j].pod +
                            " had taken it over (attempts " + std::to_string(list[j].attempts) +
                            ")");
          }
          break;
        }
      }
    }
  }
  std::printf(
      "chaos: produced %zu (+%zu re-sent) | sidecar kills -9: %d restarted under the same name, %d "
      "replaced by a new name | redis kill -9 + restart: %d | handler outages: %d | pauses: %d\n",
      ids.size(), resent, chaos.figures_.kills_same, chaos.figures_.kills_new,
      chaos.figures_.redis_restarts, chaos.figures_.handler_outages, chaos.figures_.pauses);
  std::printf(
      "chaos: lost %zu | pending at the end %lld | dead-lettered %zu | deliveries %d (503s %d, too "
      "slow %d) | 2xx answers %d, of which duplicates %d | ownership flips %zu\n",
      missing.size(), static_cast<long long>(pending()), dlq.size(), deliveries,
      chaos.ledger_.failures, chaos.ledger_.slow, total_ok, duplicate_ok, flips.size());

  EXPECT_TRUE(settled);
  EXPECT_EQ(missing.size(), 0u) << "first lost id: " << (missing.empty() ? "" : missing.front());
  EXPECT_EQ(pending(), 0);
  EXPECT_EQ(ids.size(), static_cast<size_t>(options.entries));
  EXPECT_EQ(not_in_stream, 0u) << "the producer got ids that the stream does not hold";
  // A re-sent XADD needs a Redis restart that cut off the reply.
  EXPECT_LE(resent, static_cast<size_t>(chaos.figures_.redis_restarts));
  // Dead letters: with 15% failures per attempt and 8 attempts, about 0.15^8 x entries = 0 are
  // expected; each one must be a max_attempts dead letter after its attempts were spent.
  EXPECT_LE(dlq.size(), static_cast<size_t>(options.entries / 200 + 1));
  for (const auto& [id, letter] : dlq) {
    EXPECT_EQ(letter.reason, "max_attempts") << id;
    EXPECT_GE(letter.attempts, kMaxAttempts) << id;
  }
  // Duplicate 2xx answers come only from disruptions: an acknowledgement lost with a killed
  // sidecar or a restarted Redis, an answer cut off by a handler outage, a paused owner's lease.
  // Each disruption can repeat at most what one sidecar holds.
  EXPECT_LE(duplicate_ok, chaos.figures_.disruptions() * kCapacity)
      << "duplicates beyond what the disruptions explain";
  EXPECT_TRUE(flips.empty()) << flips.size() << " ownership flips, first: " << flips.front();
  for (const auto& exit : chaos.unexpected_exits_) ADD_FAILURE() << exit;

  for (auto& sidecar : chaos.sidecars_) {
    // One may have been restarted a moment ago: let it start before asking it to stop.
    ASSERT_TRUE(
        Eventually([&] { return sidecar->Logs().find("streamcar started") != std::string::npos; },
                   seconds(15)))
        << sidecar->Logs().substr(0, 2000);
    sidecar->Terminate();
    auto code = sidecar->Wait(seconds(15));
    EXPECT_TRUE(code.has_value() && *code == 0) << sidecar->Logs().substr(0, 2000);
  }
}

TEST(Chaos, NothingIsLostUnderCrashesAndRestarts) {
  RunChaos({EnvInt("CHAOS_ENTRIES", 2000), EnvInt("CHAOS_SECONDS", 45), false});
}

TEST(Chaos, PausesLongerThanMinIdleLoseNothingAndNeverFlipOwnershipBack) {
  RunChaos({EnvInt("CHAOS_ENTRIES", 600), EnvInt("CHAOS_SECONDS", 25), true});
}

}  // namespace
}  // namespace streamcar::testing
