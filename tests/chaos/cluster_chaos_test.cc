// The chaos suite's cluster variant: at-least-once with nothing lost when sidecars and Redis
// Cluster nodes fail together. A real cluster of 3 masters and 3 replicas
// (tests/support/redis_cluster.h), one stream on each master, three sidecars (redis.mode:
// cluster, a seed url and the other nodes) consuming all three streams in one group, a slightly
// flaky handler, a producer per stream writing throughout, and at random (seeded, the seed is
// printed): a sidecar killed -9 and restarted (under its name or a new one, as a Deployment
// does), a sidecar stopped with SIGTERM (it must exit 0) and started again, a CLUSTER FAILOVER on
// the replica of a stream's master, and a stream's master killed -9 (its replica takes over; the
// dead node is then started again and rejoins as the replica of its successor). The first four
// faults are the four kinds in a seeded order, so that even the short run has each one.
//
// What must be delivered: Redis replication is asynchronous, so an XADD that a master
// acknowledged and then lost in its kill -9 before any replica had it is the producer's loss,
// not the sidecar's (docs/topologies.md). The producer therefore sends WAIT 1 after every XADD
// and counts an entry as must-deliver only when a replica took it. At the end: every
// must-deliver entry, and every entry the streams still hold, was answered 2xx or sits in its
// stream's dead-letter stream ({stream}:dlq) with reason max_attempts after its attempts; no
// group has anything pending (XPENDING on each stream's master now); dead letters and duplicate
// 2xx answers stay within what the faults explain; no sidecar exited without the test stopping
// it. The counts per fault kind and the worst stall (the largest gap between consecutive first
// deliveries of a stream, put down to the last fault before it ended) print at the end.
//
// Size: CHAOS_SECONDS of chaos (default 35) and CHAOS_ENTRIES entries over all three streams
// (default 3000), as in the plain chaos suite; CHAOS_SEED repeats a run. Plain stage only: six
// redis-servers and failovers mean nothing under sanitizers.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sidecar/redis/connection.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/sidecar_process.h"
#include "tests/support/test_handler.h"

namespace streamcar::testing {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : fallback;
}

constexpr int kMasters = 3;
constexpr int kSidecars = 3;
constexpr int kMaxAttempts = 8;
constexpr int kCapacity = 8 * 4;  // concurrency x 4: what one subscription of a sidecar holds

enum class Fault { kSidecarKill, kSidecarTerm, kFailover, kMasterKill };
constexpr Fault kFaults[] = {Fault::kSidecarKill, Fault::kSidecarTerm, Fault::kFailover,
                             Fault::kMasterKill};

const char* FaultName(Fault fault) {
  switch (fault) {
    case Fault::kSidecarKill:
      return "sidecar kill -9";
    case Fault::kSidecarTerm:
      return "sidecar SIGTERM";
    case Fault::kFailover:
      return "CLUSTER FAILOVER";
    case Fault::kMasterKill:
      return "master kill -9";
  }
  return "?";
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// The port of "MOVED 3999 127.0.0.1:6381".
int PortOfRedirect(std::string_view error) {
  const auto colon = error.rfind(':');
  return colon == std::string_view::npos ? -1
                                         : std::atoi(std::string(error.substr(colon + 1)).c_str());
}

// One entry the producer wrote.
struct Produced {
  int64_t seq = 0;
  std::string id;
  bool confirmed = false;  // WAIT 1 saw a replica take it: must be delivered
  Clock::time_point at;    // when the XADD was answered
};

// Writes `count` entries to `stream` evenly over `spread` from its own thread, wherever the
// stream lives now: it asks CLUSTER SLOTS of the first node that answers, follows MOVED, and
// waits out CLUSTERDOWN, TRYAGAIN, LOADING and lost connections. Every XADD is followed by WAIT 1
// 500 in the same pipeline. A write whose connection failed is sent again with the same seq (it
// may then exist twice; the stream's contents are checked too). Independent of the product's
// routing and of RedisCluster (whose helpers the chaos thread uses meanwhile).
class ClusterProducer {
 public:
  ClusterProducer(std::string stream, int slot, std::vector<int> ports,
                  redis::ConnectionOptions options, int count, milliseconds spread)
      : stream_(std::move(stream)),
        slot_(slot),
        ports_(std::move(ports)),
        options_(std::move(options)),
        count_(count),
        period_(spread / std::max(1, count)),
        thread_([this] { Run(); }) {}
  ~ClusterProducer() { Stop(); }
  ClusterProducer(const ClusterProducer&) = delete;
  ClusterProducer& operator=(const ClusterProducer&) = delete;

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool done() const { return done_; }
  std::vector<Produced> Entries() const {
    std::lock_guard lock(mutex_);
    return entries_;
  }
  std::string LastError() const {
    std::lock_guard lock(mutex_);
    return last_error_;
  }

 private:
  redis::ConnectionOptions OptionsFor(int port, milliseconds connect, milliseconds command) const {
    redis::ConnectionOptions options = options_;
    options.endpoint.port = port;
    options.connect_timeout = connect;
    options.command_timeout = command;
    return options;
  }

  // The port of the master of the stream's slot, or -1 when no node answers.
  int Locate() const {
    for (int port : ports_) {
      auto connection = redis::Connection::Open(OptionsFor(port, milliseconds(300), seconds(1)));
      if (!connection.ok()) continue;
      auto slots = (*connection)->Run(redis::Command("CLUSTER").Arg("SLOTS"));
      if (!slots.ok() || slots->IsError()) continue;
      for (size_t i = 0; i < slots->view().Size(); ++i) {  // [[first, last, [ip, port, id]...]]
        const auto range = slots->view()[i];
        if (range.Size() >= 3 && range[0].Integer() <= slot_ && range[1].Integer() >= slot_) {
          return static_cast<int>(range[2][1].Integer());
        }
      }
    }
    return -1;
  }

  void Note(const std::string& error) {
    std::lock_guard lock(mutex_);
    last_error_ = error;
  }

  void Run() {
    std::map<int, std::unique_ptr<redis::Connection>> connections;
    int home = -1;
    int64_t seq = 0;
    auto next = Clock::now();
    const auto retry = [&] {
      std::this_thread::sleep_for(milliseconds(50));
      home = -1;
    };
    while (!stop_ && seq < count_) {
      if (home < 0) home = Locate();
      if (home < 0) {
        Note("no node knows the slot's master");
        retry();
        continue;
      }
      auto& connection = connections[home];
      if (connection == nullptr) {
        auto opened = redis::Connection::Open(OptionsFor(home, milliseconds(500), seconds(2)));
        if (!opened.ok()) {
          Note("connect to " + std::to_string(home) + ": " + opened.status().ToString());
          connections.erase(home);
          retry();
          continue;
        }
        connection = std::move(*opened);
      }
      auto replies = connection->RunPipeline(
          {redis::Command("XADD").Arg(stream_).Arg("*").Arg("seq").Arg(seq).Arg("pad").Arg(
               std::string(64, 'p')),
           redis::Command("WAIT").Arg(int64_t{1}).Arg(int64_t{500})});
      if (!replies.ok()) {
        Note("port " + std::to_string(home) + ": " + replies.status().ToString());
        connections.erase(home);
        retry();
        continue;
      }
      const redis::Reply& added = (*replies)[0];
      if (added.IsError()) {
        const std::string error(added.view().Str());
        Note("port " + std::to_string(home) + ": " + error);
        if (StartsWith(error, "MOVED ")) {
          home = PortOfRedirect(error);
        } else {
          retry();
        }
        continue;
      }
      const redis::Reply& waited = (*replies)[1];
      Produced entry{.seq = seq,
                     .id = std::string(added.view().Str()),
                     .confirmed = waited.view().IsInteger() && waited.view().Integer() >= 1,
                     .at = Clock::now()};
      if (!entry.confirmed) home = -1;  // a master without its replica, or a demoted one
      {
        std::lock_guard lock(mutex_);
        entries_.push_back(std::move(entry));
      }
      ++seq;
      next = std::max(next + period_, Clock::now());
      std::this_thread::sleep_until(next);
    }
    done_ = seq >= count_;
  }

  const std::string stream_;
  const int slot_;
  const std::vector<int> ports_;
  const redis::ConnectionOptions options_;
  const int64_t count_;
  const milliseconds period_;
  mutable std::mutex mutex_;
  std::vector<Produced> entries_;
  std::string last_error_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// What the handler saw, per "<stream> <id>".
struct Ledger {
  std::mutex mutex;
  std::map<std::string, Clock::time_point> first;  // the first request
  std::map<std::string, int> answered_ok;          // 2xx answers
  int requests = 0, failures = 0, slow = 0;
};

std::string Key(const std::string& stream, const std::string& id) { return stream + " " + id; }

struct Letter {
  std::string id, reason;
  int attempts = 0;
};

class ClusterChaos {
 public:
  ClusterChaos()
      : seed_(static_cast<unsigned>(EnvInt("CHAOS_SEED", static_cast<int>(time(nullptr))))),
        rng_(seed_) {}

  // Streams, one per master; the handler; the three sidecars (each on all three streams).
  void SetUp() {
    cluster_ = std::make_unique<RedisCluster>();
    if (::testing::Test::HasFatalFailure()) return;
    for (int master = 0; master < kMasters; ++master) {
      streams_.push_back(cluster_->KeyOnMaster(master, "chaos-"));
    }
    handler_.SetBehaviour([this](const ReceivedRequest& r) {
      const std::string key = Key(r.Header("streamcar-stream"), r.Header("streamcar-id"));
      HandlerReply reply;
      std::lock_guard lock(ledger_.mutex);
      const int roll = static_cast<int>(handler_rng_() % 100);
      ++ledger_.requests;
      ledger_.first.emplace(key, r.at);
      if (roll < 5) {  // 5%: a server error
        ++ledger_.failures;
        reply.status = 503;
      } else if (roll < 8) {  // 3%: slower than the 400 ms timeout
        ++ledger_.slow;
        reply.delay = milliseconds(600);
        reply.status = 503;
      } else {
        ++ledger_.answered_ok[key];
      }
      return reply;
    });
    for (int slot = 0; slot < kSidecars; ++slot) StartSidecar(slot, "pod-" + std::to_string(slot));
  }

  std::string SidecarYaml(const std::string& consumer, int admin_port) const {
    std::string yaml =
        "version: 1\nredis:\n  url: " + cluster_->SeedUrl() +
        "\n  mode: cluster\n  nodes: " + cluster_->NodesYaml() +
        "\n  connect_timeout: 1s\n  command_timeout: 2s\nconsumer:\n  name: " + consumer +
        "\nadmin:\n  listen: 127.0.0.1:" + std::to_string(admin_port) +
        "\nshutdown:\n  drain_timeout: 2s\nsubscriptions:\n";
    for (const auto& stream : streams_) {
      yaml += "  - stream: \"" + stream + "\"\n    name: \"" + stream +
              "\"\n    group: workers\n    start: beginning\n    handler: { url: \"" +
              handler_.url("/" + consumer) +
              "\", timeout: 400ms, concurrency: 8 }\n    retry: { max_attempts: " +
              std::to_string(kMaxAttempts) +
              ", initial_backoff: 50ms, max_backoff: 400ms }\n"
              "    claim: { min_idle: 2s, interval: 300ms }\n";
    }
    return yaml;
  }

  void StartSidecar(int slot, const std::string& consumer) {
    // A pod's uid goes with its name (SPEC 4.7): a restart under the same name is the same
    // pod's container restarting, which takes its consumer name's lease at once.
    sidecars_[slot] = std::make_unique<SidecarProcess>(
        SidecarYaml(consumer, FreePort()), std::vector<std::string>{"POD_UID=uid-of-" + consumer});
    names_[slot] = consumer;
  }

  // An exit the test did not cause is a failure (the sidecar is started again).
  void ReportExit(int slot, const std::string& how, std::optional<int> code) {
    unexpected_exits_.push_back(names_[slot] + " exited with " + std::to_string(code.value_or(-1)) +
                                " " + how + ":\n" + sidecars_[slot]->Logs().substr(0, 6000));
  }
  void CheckAlive() {
    for (int slot = 0; slot < kSidecars; ++slot) {
      if (sidecars_[slot]->running()) continue;
      const auto code = sidecars_[slot]->Wait(milliseconds(0));
      ReportExit(slot, "on its own", code);
      sidecars_[slot]->ExpectExit(code.value_or(-1));  // reported above, once
      StartSidecar(slot, names_[slot]);
    }
  }

  // Every replica's link to its master is up and synced: a master is killed only when its
  // replica could take over with what WAIT confirmed.
  bool ReplicasInSync() const {
    for (int node = 0; node < cluster_->size(); ++node) {
      if (!cluster_->Reachable(node)) return false;
      const std::string info(cluster_->RunOn(node, {"INFO", "replication"}).view().Str());
      if (info.find("role:slave") == std::string::npos) continue;
      if (info.find("master_link_status:up") == std::string::npos ||
          info.find("master_sync_in_progress:0") == std::string::npos) {
        return false;
      }
    }
    return true;
  }

  Fault NextFault() {
    if (opening_.empty() && fault_log_.empty()) {  // each kind once first, in a seeded order
      opening_.assign(std::begin(kFaults), std::end(kFaults));
      std::shuffle(opening_.begin(), opening_.end(), rng_);
    }
    if (!opening_.empty()) {
      const Fault fault = opening_.back();
      opening_.pop_back();
      return fault;
    }
    const int roll = static_cast<int>(rng_() % 10);
    if (roll < 3) return Fault::kSidecarKill;
    if (roll < 5) return Fault::kSidecarTerm;
    if (roll < 7) return Fault::kFailover;
    return Fault::kMasterKill;
  }

  void Inject(Fault fault) {
    const int slot = static_cast<int>(rng_() % kSidecars);
    const std::string& stream = streams_[rng_() % streams_.size()];
    if (fault == Fault::kFailover || fault == Fault::kMasterKill) {
      ASSERT_TRUE(Eventually([&] { return ReplicasInSync(); }, seconds(30)))
          << "a replica never caught up with its master";
    }
    const auto at = Clock::now();
    switch (fault) {
      case Fault::kSidecarKill: {
        const bool rename = rng_() % 2 == 0;
        if (auto code = sidecars_[slot]->Kill())
          ReportExit(slot, "before the test killed it", code);
        StartSidecar(slot, rename ? "pod-" + std::to_string(next_name_++) : names_[slot]);
        renamed_ += rename ? 1 : 0;
        break;
      }
      case Fault::kSidecarTerm: {
        sidecars_[slot]->Terminate();
        const auto code = sidecars_[slot]->Wait(seconds(20));
        if (!code || *code != 0) ReportExit(slot, "on SIGTERM (0 expected)", code);
        if (!code) {
          sidecars_[slot]->Kill();
        } else {
          sidecars_[slot]->ExpectExit(*code);  // reported above when not 0
        }
        StartSidecar(slot, names_[slot]);
        break;
      }
      case Fault::kFailover: {
        const int master = cluster_->MasterIndexOf(stream);
        const int replica = master >= 0 ? cluster_->ReplicaOf(master) : -1;
        ASSERT_GE(replica, 0) << "no replica of the master of " << stream;
        cluster_->ManualFailover(replica);
        break;
      }
      case Fault::kMasterKill: {
        const int master = cluster_->MasterIndexOf(stream);
        ASSERT_GE(master, 0) << "no master serves " << stream;
        const int successor = cluster_->KillMaster(master);
        ASSERT_GE(successor, 0);
        cluster_->Restart(master);  // rejoins as the replica of its successor
        break;
      }
    }
    fault_log_.emplace_back(at, fault);
    ++counts_[fault];
  }

  // The stream's dead letters, by original id.
  std::map<std::string, Letter> DeadLetters(const std::string& stream) {
    std::map<std::string, Letter> letters;
    const std::string dlq = "{" + stream + "}:dlq";
    auto reply = cluster_->Run(dlq, {"XRANGE", dlq, "-", "+"});
    if (!reply.view().IsArray()) return letters;
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      auto fields = reply.view()[i][1];
      Letter letter;
      for (size_t k = 0; k + 1 < fields.Size(); k += 2) {
        if (fields[k].Str() == "streamcar.id") letter.id = fields[k + 1].Str();
        if (fields[k].Str() == "streamcar.reason") letter.reason = fields[k + 1].Str();
        if (fields[k].Str() == "streamcar.attempts") {
          letter.attempts = std::atoi(std::string(fields[k + 1].Str()).c_str());
        }
      }
      letters[letter.id] = letter;
    }
    return letters;
  }
  std::vector<std::string> StreamIds(const std::string& stream) {
    std::vector<std::string> ids;
    auto reply = cluster_->Run(stream, {"XRANGE", stream, "-", "+"});
    if (!reply.view().IsArray()) return ids;
    for (size_t i = 0; i < reply.view().Size(); ++i) ids.emplace_back(reply.view()[i][0].Str());
    return ids;
  }
  int64_t Pending(const std::string& stream) {
    auto reply = cluster_->Run(stream, {"XPENDING", stream, "workers"});
    if (reply.IsError() || !reply.view().IsArray() || reply.view().Size() == 0) return -1;
    return reply.view()[0].Integer();
  }

  unsigned seed_;
  std::mt19937 rng_;
  // The handler's own (its requests come from its threads, in no fixed order), under the ledger's
  // mutex: the behaviour is copied for each request, so it cannot keep state of its own.
  std::mt19937 handler_rng_{seed_ + 1};
  std::unique_ptr<RedisCluster> cluster_;
  TestHandler handler_;
  Ledger ledger_;
  std::vector<std::string> streams_;
  std::vector<Fault> opening_;
  std::vector<std::pair<Clock::time_point, Fault>> fault_log_;
  std::map<Fault, int> counts_;
  int renamed_ = 0;
  int next_name_ = kSidecars;
  std::vector<std::string> unexpected_exits_;
  std::vector<std::string> names_{kSidecars};
  // Last: destroyed first, while the cluster and the handler still serve their drain.
  std::vector<std::unique_ptr<SidecarProcess>> sidecars_{kSidecars};
};

// The largest gap between consecutive first deliveries of one stream while it was produced,
// put down to the last fault that began before the gap ended ("none" before the first fault).
struct Stall {
  milliseconds gap{0};
  size_t stream = 0;
  Clock::time_point from, to;
  std::optional<Fault> fault;
  Clock::time_point fault_at;
};

TEST(ClusterChaos, ConfirmedEntriesSurviveSidecarAndRedisFaults) {
  if (UnderSanitizer()) GTEST_SKIP() << "six redis-servers and failovers: plain stage only";
  const int chaos_seconds = EnvInt("CHAOS_SECONDS", 35);
  const int entries = EnvInt("CHAOS_ENTRIES", 3000);
  ClusterChaos chaos;
  std::printf("cluster chaos: seed %u, %d entries over %d streams, %d s of chaos\n", chaos.seed_,
              entries, kMasters, chaos_seconds);
  chaos.SetUp();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());

  std::vector<int> ports;
  ports.reserve(chaos.cluster_->size());
  for (int i = 0; i < chaos.cluster_->size(); ++i) ports.push_back(chaos.cluster_->node(i).port());
  std::vector<std::unique_ptr<ClusterProducer>> producers;
  const auto produce_start = Clock::now();
  for (int s = 0; s < kMasters; ++s) {
    const std::string& stream = chaos.streams_[s];
    producers.push_back(std::make_unique<ClusterProducer>(
        stream, chaos.cluster_->SlotOf(stream), ports, chaos.cluster_->node(0).ClientOptions(),
        entries / kMasters + (s < entries % kMasters ? 1 : 0),
        seconds(std::max(1, chaos_seconds - 5))));
  }

  // Chaos: one fault every 1.5-4 s (plus the time the cluster takes to settle after one).
  const auto chaos_end = Clock::now() + seconds(chaos_seconds);
  while (Clock::now() < chaos_end) {
    std::this_thread::sleep_for(milliseconds(1500 + chaos.rng_() % 2500));
    chaos.CheckAlive();
    chaos.Inject(chaos.NextFault());
    ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "seed " << chaos.seed_;
  }

  // The producers finish their counts (they wait out the last fault), then everything settles.
  const bool produced = Eventually(
      [&] {
        return std::all_of(producers.begin(), producers.end(),
                           [](const auto& p) { return p->done(); });
      },
      seconds(120));
  const auto produce_end = Clock::now();
  for (auto& producer : producers) producer->Stop();
  chaos.CheckAlive();

  // Every must-deliver entry and every entry a stream holds: answered 2xx or dead-lettered.
  std::vector<std::vector<Produced>> written;
  written.reserve(producers.size());
  for (const auto& producer : producers) written.push_back(producer->Entries());
  struct Missing {
    std::vector<std::string> confirmed, in_stream;
  };
  const auto missing = [&] {
    Missing out;
    for (size_t s = 0; s < chaos.streams_.size(); ++s) {
      const std::string& stream = chaos.streams_[s];
      const auto dlq = chaos.DeadLetters(stream);
      const auto ids = chaos.StreamIds(stream);
      std::lock_guard lock(chaos.ledger_.mutex);
      const auto settled = [&](const std::string& id) {
        return chaos.ledger_.answered_ok.count(Key(stream, id)) > 0 || dlq.count(id) > 0;
      };
      for (const auto& e : written[s]) {
        if (e.confirmed && !settled(e.id)) out.confirmed.push_back(Key(stream, e.id));
      }
      for (const auto& id : ids) {
        if (!settled(id)) out.in_stream.push_back(Key(stream, id));
      }
    }
    return out;
  };
  const auto pending = [&] {
    int64_t total = 0;
    for (const auto& stream : chaos.streams_) {
      const int64_t n = chaos.Pending(stream);
      if (n < 0) return int64_t{-1};
      total += n;
    }
    return total;
  };
  bool settled = false;
  for (const auto deadline = Clock::now() + seconds(90); !settled && Clock::now() < deadline;) {
    const auto m = missing();
    settled = m.confirmed.empty() && m.in_stream.empty() && pending() == 0;
    if (!settled) std::this_thread::sleep_for(milliseconds(500));
  }
  chaos.CheckAlive();
  const auto lost = missing();
  const int64_t left_pending = pending();

  // Figures.
  size_t written_total = 0, confirmed = 0, in_streams = 0;
  std::map<std::string, Letter> letters;  // "<stream> <id>"
  for (size_t s = 0; s < chaos.streams_.size(); ++s) {
    written_total += written[s].size();
    for (const auto& e : written[s]) confirmed += e.confirmed ? 1 : 0;
    in_streams += chaos.StreamIds(chaos.streams_[s]).size();
    for (const auto& [id, letter] : chaos.DeadLetters(chaos.streams_[s])) {
      letters[Key(chaos.streams_[s], id)] = letter;
    }
  }
  int ok_total = 0, duplicates = 0, requests = 0;
  std::vector<Stall> stalls;
  {
    std::lock_guard lock(chaos.ledger_.mutex);
    requests = chaos.ledger_.requests;
    for (const auto& [key, n] : chaos.ledger_.answered_ok) {
      ok_total += n;
      duplicates += n - 1;
    }
    for (size_t s = 0; s < chaos.streams_.size(); ++s) {
      const std::string& stream = chaos.streams_[s];
      std::vector<Clock::time_point> times;
      for (const auto& [key, at] : chaos.ledger_.first) {
        if (StartsWith(key, stream + " ") && at <= produce_end) times.push_back(at);
      }
      std::sort(times.begin(), times.end());
      for (size_t i = 1; i < times.size(); ++i) {
        Stall stall{.gap = duration_cast<milliseconds>(times[i] - times[i - 1]),
                    .stream = s,
                    .from = times[i - 1],
                    .to = times[i]};
        for (const auto& [at, fault] : chaos.fault_log_) {
          if (at <= times[i]) {
            stall.fault = fault;
            stall.fault_at = at;
          }
        }
        stalls.push_back(stall);
      }
    }
  }
  std::map<std::string, milliseconds> worst;  // per fault kind
  Stall overall;
  for (const auto& stall : stalls) {
    auto& w = worst[stall.fault ? FaultName(*stall.fault) : "none"];
    w = std::max(w, stall.gap);
    if (stall.gap > overall.gap) overall = stall;
  }
  std::printf("cluster chaos: faults:");
  for (Fault fault : kFaults) std::printf(" %s %d |", FaultName(fault), chaos.counts_[fault]);
  std::printf(" (sidecars renamed on restart: %d)\n", chaos.renamed_);
  std::printf(
      "cluster chaos: written %zu (%zu confirmed by WAIT, %zu in the streams at the end) in %lld s "
      "| lost: confirmed %zu, in the streams %zu | pending at the end %lld | dead-lettered %zu | "
      "requests %d (503s %d, too slow %d) | 2xx answers %d, of which duplicates %d\n",
      written_total, confirmed, in_streams,
      static_cast<long long>(duration_cast<seconds>(produce_end - produce_start).count()),
      lost.confirmed.size(), lost.in_stream.size(), static_cast<long long>(left_pending),
      letters.size(), requests, chaos.ledger_.failures, chaos.ledger_.slow, ok_total, duplicates);
  // Whether the producer stalled too (a cluster outage) or wrote on while nothing was delivered.
  size_t written_in_stall = 0;
  for (const auto& e : written[overall.stream]) {
    written_in_stall += e.at > overall.from && e.at < overall.to ? 1 : 0;
  }
  std::printf(
      "cluster chaos: worst stall %lld ms on %s, starting %+lld ms from the last fault (%s), while "
      "the producer wrote %zu entries to it | worst per fault kind:",
      static_cast<long long>(overall.gap.count()), chaos.streams_[overall.stream].c_str(),
      static_cast<long long>(
          overall.fault ? duration_cast<milliseconds>(overall.from - overall.fault_at).count() : 0),
      overall.fault ? FaultName(*overall.fault) : "none", written_in_stall);
  for (const auto& [kind, gap] : worst) {
    std::printf(" %s %lld ms |", kind.c_str(), static_cast<long long>(gap.count()));
  }
  std::printf("\n");

  EXPECT_TRUE(produced) << "the producers did not finish; last errors: "
                        << producers[0]->LastError() << " / " << producers[1]->LastError() << " / "
                        << producers[2]->LastError();
  EXPECT_TRUE(settled) << "seed " << chaos.seed_;
  EXPECT_TRUE(lost.confirmed.empty())
      << lost.confirmed.size() << " confirmed entries never answered 2xx nor dead-lettered, first: "
      << lost.confirmed.front() << " (seed " << chaos.seed_ << ")";
  EXPECT_TRUE(lost.in_stream.empty())
      << lost.in_stream.size() << " entries in the streams never answered 2xx nor dead-lettered, "
      << "first: " << lost.in_stream.front() << " (seed " << chaos.seed_ << ")";
  EXPECT_EQ(left_pending, 0) << "seed " << chaos.seed_;
  // Enough confirmed entries to prove anything: a replica is missing only between a master's
  // kill -9 and its restart.
  EXPECT_GE(confirmed, written_total * 3 / 4);
  // Dead letters: about 0.08^8 x entries = 0 from the handler; each fault adds at most an attempt
  // or two to what the sidecars held. Each one is a max_attempts letter after its attempts.
  EXPECT_LE(letters.size(), static_cast<size_t>(entries / 200 + 1));
  for (const auto& [key, letter] : letters) {
    EXPECT_EQ(letter.reason, "max_attempts") << key;
    EXPECT_GE(letter.attempts, kMaxAttempts) << key;
  }
  // Duplicate 2xx answers come only from faults (an acknowledgement lost with a killed sidecar or
  // master, an entry reclaimed from a stopped one): each can repeat at most what the sidecars
  // held.
  EXPECT_LE(duplicates,
            static_cast<int>(chaos.fault_log_.size()) * kSidecars * kMasters * kCapacity);
  for (const auto& exit : chaos.unexpected_exits_) ADD_FAILURE() << exit;

  for (auto& sidecar : chaos.sidecars_) {
    // One may have been started a moment ago: let it start before asking it to stop.
    ASSERT_TRUE(
        Eventually([&] { return sidecar->Logs().find("streamcar started") != std::string::npos; },
                   seconds(20)))
        << sidecar->Logs().substr(0, 4000);
    sidecar->Terminate();
    const auto code = sidecar->Wait(seconds(20));
    EXPECT_TRUE(code.has_value() && *code == 0) << sidecar->Logs().substr(0, 4000);
  }
}

}  // namespace
}  // namespace streamcar::testing
