// The sharded chaos run (SHARDING.md B10.3, B10.5): one sharded subscription of S = 8 shards,
// real `streamcar run` members against a real redis-server, a producer writing a sequence
// number per shard, and a real HTTP handler that keeps a *fenced side-effect log*: it applies a
// write only when its `Streamcar-Fence` is at least the highest fence it has seen for that shard,
// as SHARDING.md B5 asks of a handler with side effects (and answers 200 after 0-20 ms).
// Every 1.5-3 s one fault at random (seeded, the seed printed): kill -9 of a member (respawned 0.5
// s later), SIGSTOP for longer than the session timeout then SIGCONT, SIGTERM (a graceful leave,
// then a respawn), a new member. Then the faults stop, the group converges, and:
// - I1: in the fenced log, per shard, a token is used by one member process and on one shard;
//   within one token the sequence goes strictly +1 (a retry of the same entry after a handler
//   timeout, while its token is still the shard's newest grant, is counted apart: at-least-once
//   inside one segment); a new token never skips (it may redo the previous owner's
//   unacknowledged tail). A stale member's POST that was already on its way is
//   rejected by the fence check: I1 is about the accepted log (B9 says what it does not cover);
// - I4: every produced entry was accepted at least once, every shard's PEL is empty and its
//   last-delivered id is its tail;
// - I3: the longest stretch without an accepted write on a shard that has a backlog stays under
//   max(session, drain) + 2 x heartbeat + min_assignment_interval + takeover (per fault that
//   overlaps the stretch: two faults in a row may chain, e.g. a shard's target member is stopped
//   while it waits for the previous owner's session to run out).
// Printed: what an unprotected handler would have seen (duplicates, writes landing after a newer
// entry), stale POSTs the fence rejected, the longest gap per fault kind, the measured takeover
// (grant event -> first accepted write), entries/s and the faults applied.
//
// Cases: the plain run; every member's lease clock at half speed (STREAMCAR_TEST_LEASE_CLOCK_RATE
// = 0.5, B10.5): the lease stops protecting, I1 and I4 must hold; every member's wall clock
// skewed by +1 h or -1 h (libfaketime, alternating per member process, monotonic and boot clocks
// untouched): the same checks hold; batch_size 10, so that a shard's requests carry runs of its
// entries (SPEC 9): the same checks, entry by entry.
//
// Size: SHARDED_CHAOS_SECONDS of faults (default CHAOS_SECONDS, else 20) for the plain run,
// SHARDED_CHAOS_CLOCK_SECONDS (default half of that, at least 13: four faults of up to 3 s, one of
// each kind) for the other cases, SHARDED_CHAOS_RATE entries/s (default 160), SHARDED_CHAOS_SEED
// (default: time). About 65 s of wall time for the four cases by default (CI's 45 minutes); the
// figures in docs/reliability.md come from SHARDED_CHAOS_SECONDS=30. A failed run copies every
// member's log to /tmp/sharded-chaos-<seed>-<case>/.

#include <rapidjson/document.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "sidecar/keys/sharding_keys.h"
#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

using Clock = std::chrono::steady_clock;

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoi(value) : fallback;
}

int64_t WallMillis() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The group's timing: valid for `streamcar check` (sidecar/config/validate.cc: heartbeat and
// command timeout at most a third of the session, handler timeout < drain < rebalance - 2 x
// heartbeat, shutdown drain >= drain) and short, so that a SIGSTOP of 2-3.5 s outlives a session.
constexpr int kShards = 8;
constexpr milliseconds kSession{2000};
constexpr milliseconds kHeartbeat{500};
constexpr milliseconds kRebalance{3000};
constexpr milliseconds kDrain{1000};
constexpr milliseconds kMinAssignInterval{0};
constexpr milliseconds kCommandTimeout{500};
constexpr milliseconds kHandlerTimeout{800};
// The takeover term of I3: after its grant, the new owner installs its fence, claims the shard's
// PEL and reads, each one Redis command bounded by redis.command_timeout, before its first POST
// (which the handler accepts on arrival). The measured takeover is printed beside it.
constexpr milliseconds kTakeover = 3 * kCommandTimeout;
constexpr milliseconds kI3Bound =
    std::max(kSession, kDrain) + 2 * kHeartbeat + kMinAssignInterval + kTakeover;
constexpr size_t kFirstMembers = 3;
constexpr size_t kMostMembers = 5;

const char* const kLibFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

// One POST as the handler saw it.
struct Write {
  int shard = -1;
  int64_t seq = 0;
  int64_t fence = 0;
  std::string member;  // the member process (its handler path)
  int attempts = 0;
  Clock::time_point at;
  int64_t wall_ms = 0;
  bool accepted = false;  // applied by the fenced side-effect log
};

// The handler's side-effect log: a write is applied when its fence is at least the highest fence
// seen for its shard (UPDATE ... WHERE shard = s AND fence <= f), in the order the handler takes
// its lock, which is the order the effects are applied in.
class FencedLog {
 public:
  // One request: one entry, or a batch (the batched case), whose entries are applied in order.
  HandlerReply Record(const ReceivedRequest& request) {
    Write w;
    w.shard = std::atoi(request.Header("streamcar-shard").c_str());
    w.fence = std::atoll(request.Header("streamcar-fence").c_str());
    w.member = request.path.substr(1);
    w.at = request.at;
    w.wall_ms = WallMillis();
    std::vector<Write> writes;
    rapidjson::Document body;
    body.Parse(request.body.c_str());
    auto seq_of = [](const rapidjson::Value& envelope) -> int64_t {
      if (!envelope.IsObject() || !envelope.HasMember("payload")) return 0;
      const auto& payload = envelope["payload"];
      if (!payload.IsObject() || !payload.HasMember("seq") || !payload["seq"].IsString()) return 0;
      return std::atoll(payload["seq"].GetString());
    };
    if (body.IsObject() && body.HasMember("entries") && body["entries"].IsArray()) {
      for (const auto& entry : body["entries"].GetArray()) {
        w.seq = seq_of(entry);
        w.attempts = entry.HasMember("attempts") ? entry["attempts"].GetInt() : 0;
        writes.push_back(w);
      }
    } else {
      w.seq = seq_of(body);
      w.attempts = std::atoi(request.Header("streamcar-attempts").c_str());
      writes.push_back(w);
    }
    std::lock_guard lock(mutex_);
    int64_t& highest = highest_fence_[w.shard];
    for (Write& write : writes) {
      write.accepted = write.fence >= highest && write.seq > 0;
      writes_.push_back(write);
    }
    highest = std::max(highest, w.fence);
    // 200, never a failure, so every repeat is the protocol's doing; after 0-20 ms of "work",
    // so that a member stopped or killed has a request in flight now and then (the effect is
    // applied on arrival, as a handler's transaction would commit before it answers).
    HandlerReply reply;
    reply.delay = milliseconds(random_() % 21);
    return reply;
  }
  std::vector<Write> Writes() const {
    std::lock_guard lock(mutex_);
    return writes_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<int, int64_t> highest_fence_;
  std::mt19937 random_{20261201};  // under mutex_
  std::vector<Write> writes_;
};

enum class FaultKind { kKill, kStop, kTerm, kJoin };
const char* NameOf(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKill:
      return "kill -9";
    case FaultKind::kStop:
      return "SIGSTOP";
    case FaultKind::kTerm:
      return "SIGTERM";
    case FaultKind::kJoin:
      return "join";
  }
  return "?";
}

// A fault and the time it acted: a kill until the respawn, a stop until SIGCONT, a SIGTERM until
// the respawn, a join at one instant.
struct Fault {
  FaultKind kind;
  std::string member;
  Clock::time_point from, to;
};

// One member slot (a "pod"): its current process, and what happens to it next.
struct Slot {
  std::string pod;
  std::unique_ptr<SidecarProcess> process;
  std::string member;  // the handler path of the current process
  enum class State { kRunning, kStopped, kLeaving, kDown } state = State::kRunning;
  Clock::time_point next;  // SIGCONT (stopped), respawn (down), give up on the exit (leaving)
  size_t fault = 0;        // the fault acting on it
};

struct RunOptions {
  std::string name;
  int seconds = 30;
  std::vector<std::string> env;  // every member's extra environment
  bool skew_wall_clock = false;  // +1 h / -1 h per member process (libfaketime)
  int batch_size = 1;            // handler.batch_size: > 1, a shard's requests carry runs
  bool assert_i3 = true;
};

class ShardedChaosTest : public E2eTest {
 protected:
  std::string ShardKey(int shard) const { return keys::ShardKey("orders:{%d}", shard); }

  SidecarConfig MemberConfig(const std::string& pod, const std::string& member,
                             int batch_size) const {
    SidecarConfig c;
    c.consumer = pod;
    c.handler_url = handler_.url("/" + member);
    c.handler_extra = "timeout: " + std::to_string(kHandlerTimeout.count()) +
                      "ms, batch_size: " + std::to_string(batch_size);
    c.command_timeout = std::to_string(kCommandTimeout.count()) + "ms";
    c.drain_timeout = "2s";  // shutdown: at least the shard drain
    auto ms = [](milliseconds d) { return std::to_string(d.count()) + "ms"; };
    c.subscription_extra =
        "    sharding: { shards: " + std::to_string(kShards) +
        ", session_timeout: " + ms(kSession) + ", heartbeat_interval: " + ms(kHeartbeat) +
        ", rebalance_timeout: " + ms(kRebalance) + ", drain_timeout: " + ms(kDrain) +
        ", initial_delay: 0s, min_assignment_interval: " + ms(kMinAssignInterval) + " }\n";
    return c;
  }

  void Spawn(Slot& slot, const RunOptions& options) {
    if (slot.process) graveyard_.push_back(std::move(slot.process));  // keeps its log
    slot.member = "m" + std::to_string(incarnations_++);
    std::vector<std::string> env = options.env;
    if (options.skew_wall_clock) {
      const bool ahead = incarnations_ % 2 == 1;
      skew_of_[slot.member] = ahead ? 3600 : -3600;
      env.push_back(std::string("LD_PRELOAD=") + kLibFaketime);
      env.push_back(ahead ? "FAKETIME=+1h" : "FAKETIME=-1h");
      // Monotonic and boot clocks untouched (the lease clock is CLOCK_BOOTTIME): only the wall
      // clock moves. The name as libfaketime 0.9.10 reads it (its README).
      env.push_back("FAKETIME_DONT_FAKE_MONOTONIC=1");
    }
    slot.process = StartPeer(MemberConfig(slot.pod, slot.member, options.batch_size), env);
    slot.state = Slot::State::kRunning;
  }

  // The coordinator's events (SHARDING.md B2), read as they come: the stream keeps ~1000.
  void CollectEvents() {
    auto reply = redis_->Run({"XRANGE", coordinator_.events, "(" + last_event_, "+"});
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      std::map<std::string, std::string> fields;
      auto pairs = reply.view()[i][1];
      for (size_t k = 0; k + 1 < pairs.Size(); k += 2)
        fields[std::string(pairs[k].Str())] = pairs[k + 1].Str();
      last_event_ = reply.view()[i][0].Str();
      fields["id"] = last_event_;
      events_.push_back(std::move(fields));
    }
  }

  void Run(const RunOptions& options);
  void DumpLogs(const std::string& dir);

  keys::CoordinatorKeys coordinator_ = keys::CoordinatorKeysFor("orders", "billing");
  FencedLog log_;
  unsigned seed_ = 0;
  int incarnations_ = 0;
  std::map<std::string, int> skew_of_;  // member -> seconds of wall-clock skew
  std::string last_event_ = "0-0";
  std::vector<std::map<std::string, std::string>> events_;
  std::vector<Fault> faults_;
  // Last: destroyed first (SIGTERM, exit 0 checked), while Redis and the handler still serve.
  std::vector<std::unique_ptr<SidecarProcess>> graveyard_;
  std::vector<Slot> slots_;
};

void ShardedChaosTest::DumpLogs(const std::string& dir) {
  std::filesystem::create_directories(dir);
  auto dump = [&](const SidecarProcess& p, const std::string& name) {
    std::ofstream(dir + "/" + name + ".log") << p.Logs();
  };
  for (size_t i = 0; i < graveyard_.size(); ++i) dump(*graveyard_[i], "old-" + std::to_string(i));
  for (const Slot& slot : slots_) dump(*slot.process, slot.member + "-" + slot.pod);
  std::ofstream events(dir + "/events.txt");
  for (const auto& e : events_) {
    for (const auto& [k, v] : e) events << k << "=" << v << " ";
    events << "\n";
  }
  std::ofstream writes(dir + "/writes.txt");
  for (const Write& w : log_.Writes()) {
    writes << w.wall_ms << " shard " << w.shard << " seq " << w.seq << " fence " << w.fence
           << " member " << w.member << " attempts " << w.attempts
           << (w.accepted ? " accepted" : " REJECTED") << "\n";
  }
}

void ShardedChaosTest::Run(const RunOptions& options) {
  seed_ = static_cast<unsigned>(EnvInt("SHARDED_CHAOS_SEED", static_cast<int>(time(nullptr))));
  std::mt19937 rng(seed_);
  const int rate = std::max(1, EnvInt("SHARDED_CHAOS_RATE", 160));
  std::printf("sharded chaos [%s]: seed %u, S=%d, %d s of faults, %d entries/s%s%s\n",
              options.name.c_str(), seed_, kShards, options.seconds, rate,
              options.env.empty() ? "" : (", member env " + options.env.front()).c_str(),
              options.skew_wall_clock ? ", wall clocks +1h/-1h (libfaketime)" : "");
  handler_.SetBehaviour([this](const ReceivedRequest& r) { return log_.Record(r); });

  for (size_t i = 0; i < kFirstMembers; ++i) {
    slots_.push_back({.pod = "pod-" + std::to_string(i)});
    Spawn(slots_.back(), options);
  }
  // The first members settled (every shard owned by its target, each member holding some)
  // before the producer starts: I3 measures the faults, not the first rebalance.
  auto hash = [&](const std::string& key) {
    std::map<std::string, std::string> out;
    auto reply = redis_->Run({"HGETALL", key});
    for (size_t k = 0; k + 1 < reply.view().Size(); k += 2) {
      out[std::string(reply.view()[k].Str())] = reply.view()[k + 1].Str();
    }
    return out;
  };
  ASSERT_TRUE(Eventually(
      [&] {
        const auto owner = hash(coordinator_.owner);
        std::set<std::string> owners;
        for (const auto& [shard, member] : owner) owners.insert(member);
        return owner.size() == kShards && owners.size() == kFirstMembers &&
               owner == hash(coordinator_.target);
      },
      seconds(30)))
      << slots_[0].process->Logs();
  if (options.skew_wall_clock) {
    // The skew must reach the binary, or this case proves nothing: its log's timestamps (wall
    // clock, RFC 3339) are an hour off.
    for (const Slot& slot : slots_) {
      const std::string logs = slot.process->Logs();
      const size_t at = logs.find("\"ts\":\"");
      ASSERT_NE(at, std::string::npos) << logs;
      std::tm tm{};
      ASSERT_NE(strptime(logs.substr(at + 6, 19).c_str(), "%Y-%m-%dT%H:%M:%S", &tm), nullptr);
      const int64_t logged = static_cast<int64_t>(timegm(&tm));
      const int64_t skew = logged - WallMillis() / 1000;
      EXPECT_NEAR(static_cast<double>(skew), skew_of_[slot.member], 60) << logs.substr(at, 40);
    }
  }

  // The producer: keys routed as streamcar routes them (crc32 mod S, SPEC 9), a sequence number
  // per shard from 1, and when each entry was written.
  std::vector<std::vector<Clock::time_point>> produced_at(kShards);
  std::vector<std::vector<int64_t>> produced_wall(kShards);
  std::atomic<bool> producing{true};
  std::mutex produced_mutex;
  std::thread producer([&] {
    auto connection = redis_->Connect();
    const auto pause = std::chrono::microseconds(1000000 / rate);
    auto next = Clock::now();
    for (int64_t i = 0; producing.load(); ++i) {
      const std::string key = "k" + std::to_string(i % 64);
      const int shard = keys::ShardOf(key, kShards);
      int64_t seq;
      {
        std::lock_guard lock(produced_mutex);
        seq = static_cast<int64_t>(produced_at[shard].size()) + 1;
      }
      auto reply = connection->Run(redis::Command("XADD")
                                       .Arg(ShardKey(shard))
                                       .Arg("*")
                                       .Arg("key")
                                       .Arg(key)
                                       .Arg("seq")
                                       .Arg(seq));
      if (!reply.ok() || reply->IsError()) {
        ADD_FAILURE() << "XADD failed";
        return;
      }
      {
        std::lock_guard lock(produced_mutex);
        produced_at[shard].push_back(Clock::now());
        produced_wall[shard].push_back(WallMillis());
      }
      next += pause;
      std::this_thread::sleep_until(next);
    }
  });

  // The faults, one every 1.5-3 s; SIGCONTs, respawns and exits are handled as they fall due.
  const auto started = Clock::now();
  const auto faults_end = started + seconds(options.seconds);
  auto next_fault = started + milliseconds(1500 + rng() % 1500);
  std::vector<std::string> failures;
  std::vector<FaultKind> first_kinds = {FaultKind::kKill, FaultKind::kStop, FaultKind::kTerm,
                                        FaultKind::kJoin};
  std::shuffle(first_kinds.begin(), first_kinds.end(), rng);
  while (true) {
    const auto now = Clock::now();
    bool settled = true;
    for (Slot& slot : slots_) {
      switch (slot.state) {
        case Slot::State::kRunning:
          if (!slot.process->running()) {
            failures.push_back(slot.member + " exited on its own with " +
                               std::to_string(slot.process->Wait(milliseconds(0)).value_or(-1)));
            slot.process->ExpectExit(slot.process->Wait(milliseconds(0)).value_or(-1));
            Spawn(slot, options);
          }
          break;
        case Slot::State::kStopped:
          settled = false;
          if (now >= slot.next) {
            slot.process->Resume();
            faults_[slot.fault].to = now;
            slot.state = Slot::State::kRunning;
          }
          break;
        case Slot::State::kLeaving:
          settled = false;
          if (auto code = slot.process->Wait(milliseconds(0))) {
            // A graceful leave exits 0 (checked again at teardown); the respawn comes 0.5 s later.
            if (*code != 0)
              failures.push_back(slot.member + " left with exit code " + std::to_string(*code));
            slot.state = Slot::State::kDown;
            slot.next = now + milliseconds(500);
          } else if (now >= slot.next) {
            failures.push_back(slot.member + " did not exit within 5 s of SIGTERM; its threads:\n" +
                               slot.process->ThreadStacks());
            slot.process->Kill();
            slot.state = Slot::State::kDown;
            slot.next = now;
          }
          break;
        case Slot::State::kDown:
          settled = false;
          if (now >= slot.next) {
            Spawn(slot, options);
            faults_[slot.fault].to = now;
          }
          break;
      }
    }
    if (now >= faults_end && settled) break;
    if (now >= next_fault && now < faults_end) {
      next_fault = now + milliseconds(1500 + rng() % 1500);
      std::vector<size_t> running;
      for (size_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i].state == Slot::State::kRunning) running.push_back(i);
      }
      // The first four faults are the four kinds in a seeded order, so that even a short run
      // sees each; then at random.
      auto kind = faults_.size() < first_kinds.size() ? first_kinds[faults_.size()]
                                                      : static_cast<FaultKind>(rng() % 4);
      if (kind == FaultKind::kJoin && slots_.size() >= kMostMembers) {
        kind = static_cast<FaultKind>(rng() % 3);
      }
      if (kind == FaultKind::kTerm) {
        // A SIGTERM before the process reaches main() ends it by the signal's default action
        // (exit 143), as it would any program (a loaded host, libfaketime's start-up): it is
        // sent only to a member that has started, which its first log line shows (written after
        // main() blocked the signal for the graceful stop).
        std::erase_if(running, [&](size_t i) { return slots_[i].process->Logs().empty(); });
      }
      if (kind == FaultKind::kJoin) {
        slots_.push_back({.pod = "pod-" + std::to_string(slots_.size())});
        Spawn(slots_.back(), options);
        faults_.push_back({kind, slots_.back().member, now, now});
      } else if (running.size() > 1) {  // never the last running member: that is not a fault
        Slot& slot = slots_[running[rng() % running.size()]];
        faults_.push_back({kind, slot.member, now, now});
        slot.fault = faults_.size() - 1;
        if (kind == FaultKind::kKill) {
          slot.process->Kill();
          slot.state = Slot::State::kDown;
          slot.next = now + milliseconds(500);
        } else if (kind == FaultKind::kStop) {
          slot.process->Pause();
          slot.state = Slot::State::kStopped;
          slot.next = now + milliseconds(2000 + rng() % 1500);
        } else {
          slot.process->Terminate();
          slot.state = Slot::State::kLeaving;
          slot.next = now + seconds(5);
        }
      }
    }
    CollectEvents();
    std::this_thread::sleep_for(milliseconds(50));
  }
  producing = false;
  producer.join();
  const double fault_seconds = Seconds(Clock::now() - started);

  // Convergence: every produced entry accepted, every PEL empty, every group at its tail.
  auto accepted_all = [&] {
    std::vector<std::set<int64_t>> seen(kShards);
    for (const Write& w : log_.Writes()) {
      if (w.accepted && w.shard >= 0 && w.shard < kShards) seen[w.shard].insert(w.seq);
    }
    std::vector<int64_t> missing(kShards, 0);
    for (int s = 0; s < kShards; ++s) {
      for (int64_t seq = 1; seq <= static_cast<int64_t>(produced_at[s].size()); ++seq) {
        missing[s] += seen[s].contains(seq) ? 0 : 1;
      }
    }
    return missing;
  };
  auto pending = [&](int shard) {
    auto reply = redis_->RunAllowingError({"XPENDING", ShardKey(shard), "billing"});
    return reply.IsError() ? int64_t{-1} : reply.view()[0].Integer();
  };
  // The group's last-delivered id and the stream's last id.
  auto ids = [&](int shard) {
    std::pair<std::string, std::string> out;
    auto groups = redis_->Run({"XINFO", "GROUPS", ShardKey(shard)});
    for (size_t g = 0; g < groups.view().Size(); ++g) {
      auto group = groups.view()[g];
      for (size_t k = 0; k + 1 < group.Size(); k += 2) {
        if (group[k].Str() == "last-delivered-id") out.first = group[k + 1].Str();
      }
    }
    auto stream = redis_->Run({"XINFO", "STREAM", ShardKey(shard)});
    for (size_t k = 0; k + 1 < stream.view().Size(); k += 2) {
      if (stream.view()[k].Str() == "last-generated-id") out.second = stream.view()[k + 1].Str();
    }
    return out;
  };
  auto converged = [&] {
    CollectEvents();
    const auto missing = accepted_all();
    for (int s = 0; s < kShards; ++s) {
      if (missing[s] != 0 || pending(s) != 0 || ids(s).first != ids(s).second) return false;
    }
    return true;
  };
  const auto converge_from = Clock::now();
  const bool converged_in_time = Eventually(converged, seconds(60));
  const double converge_seconds = Seconds(Clock::now() - converge_from);
  CollectEvents();

  const std::vector<Write> writes = log_.Writes();
  size_t produced = 0;
  for (const auto& shard : produced_at) produced += shard.size();

  // I1 on the accepted log, and token ownership on every write.
  std::vector<std::string> i1;
  std::map<int64_t, std::string> member_of_token;
  std::map<int64_t, int> shard_of_token;
  for (const Write& w : writes) {
    auto [m, new_m] = member_of_token.emplace(w.fence, w.member);
    if (!new_m && m->second != w.member) {
      i1.push_back("fence " + std::to_string(w.fence) + " used by " + m->second + " and " +
                   w.member);
    }
    auto [s, new_s] = shard_of_token.emplace(w.fence, w.shard);
    if (!new_s && s->second != w.shard) {
      i1.push_back("fence " + std::to_string(w.fence) + " on shards " + std::to_string(s->second) +
                   " and " + std::to_string(w.shard));
    }
  }
  // When each token stopped being the newest grant of its shard (Redis TIME of the next grant):
  // a member learns of that at its next heartbeat at the latest, and must not start new POSTs
  // with the old token after it.
  std::map<int, std::map<int64_t, int64_t>> grants;  // shard -> fence -> granted at (ms)
  for (const auto& e : events_) {
    auto type = e.find("type");
    if (type == e.end() || type->second != "grant") continue;
    grants[std::atoi(e.at("shard").c_str())][std::atoll(e.at("fence").c_str())] =
        std::atoll(e.at("id").c_str());
  }
  auto superseded_at = [&](int shard, int64_t fence) {
    int64_t at = INT64_MAX;
    for (auto it = grants[shard].upper_bound(fence); it != grants[shard].end(); ++it) {
      at = std::min(at, it->second);
    }
    return at;
  };
  // The fenced log's rule makes the accepted tokens of a shard non-decreasing by construction;
  // what the product must make true is the sequence inside and across them.
  int64_t redone = 0, tokens_used = 0, retries_in_token = 0;
  std::vector<int64_t> stale_rejected(kShards, 0);
  for (int s = 0; s < kShards; ++s) {
    int64_t token = 0, last_in_token = 0, highest = 0;
    int last_attempts = 0;
    for (const Write& w : writes) {
      if (w.shard != s) continue;
      if (!w.accepted) {
        ++stale_rejected[s];
        continue;
      }
      const std::string where = "shard " + std::to_string(s) + " fence " + std::to_string(w.fence) +
                                " (" + w.member + ") seq " + std::to_string(w.seq);
      if (w.fence != token) {
        ++tokens_used;
        if (w.seq > highest + 1) {
          i1.push_back(where + ": a new token skipped from seq " + std::to_string(highest));
        }
        redone += std::max<int64_t>(0, highest + 1 - w.seq);
        token = w.fence;
      } else if (w.seq == last_in_token && (w.attempts > 1 || last_attempts > 1) &&
                 w.wall_ms < superseded_at(s, w.fence)) {
        // The same entry again, as a retry (SPEC 3.2: the answer came after handler.timeout,
        // which only a stall of this machine makes happen here) while its token was still the
        // shard's newest: at-least-once inside one owner's segment, which no fence can tell
        // from the first attempt. Counted, not an I1 break. The log is in the order the handler
        // took its lock, so a first attempt whose handler thread stalled past the timeout is
        // recorded after its retry: either of the two may be the retry.
        ++retries_in_token;
      } else if (w.seq != last_in_token + 1) {
        const int64_t after = superseded_at(s, w.fence);
        i1.push_back(where + ": after seq " + std::to_string(last_in_token) +
                     " in the same token (attempts " + std::to_string(w.attempts) + ")" +
                     (w.wall_ms >= after ? ", POSTed " + std::to_string(w.wall_ms - after) +
                                               " ms after a newer grant of the shard"
                                         : ""));
      }
      last_in_token = w.seq;
      last_attempts = w.attempts;
      highest = std::max(highest, w.seq);
    }
  }

  // What an unprotected handler would have seen: every POST applied in arrival order.
  int64_t duplicates = 0, out_of_order = 0, stale_total = 0;
  {
    std::vector<std::set<int64_t>> seen(kShards);
    std::vector<int64_t> newest(kShards, 0);
    for (const Write& w : writes) {
      if (w.shard < 0 || w.shard >= kShards) continue;
      if (!seen[w.shard].insert(w.seq).second) ++duplicates;
      if (w.seq < newest[w.shard]) ++out_of_order;
      newest[w.shard] = std::max(newest[w.shard], w.seq);
    }
    for (int64_t n : stale_rejected) stale_total += n;
  }

  // I3: per shard, the stretches between accepted writes while entries waited.
  struct Gap {
    int shard = -1;
    Clock::time_point from, to;
    double seconds() const { return Seconds(to - from); }
  };
  std::vector<Gap> gaps;
  for (int s = 0; s < kShards; ++s) {
    Clock::time_point last{};
    int64_t highest = 0;
    bool first = true;
    for (const Write& w : writes) {
      if (w.shard != s || !w.accepted) continue;
      if (!first && highest < static_cast<int64_t>(produced_at[s].size())) {
        // The shard had work from when the entry after the highest accepted one was written.
        const Clock::time_point waiting_since = std::max(last, produced_at[s][highest]);
        if (w.at > waiting_since) gaps.push_back({s, waiting_since, w.at});
      }
      first = false;
      last = w.at;
      highest = std::max(highest, w.seq);
    }
  }
  // The faults acting during a stretch (a kill until its respawn, a stop until SIGCONT...; from a
  // heartbeat before it: a POST sent just before a SIGSTOP still lands after it). Each can cost
  // the shard at most one bound: a second fault chains onto the first when, say, the member the
  // shard is meant for is stopped while it waits for the previous owner's session to run out.
  auto faults_near = [&](const Gap& g) {
    std::vector<const Fault*> near;
    for (const Fault& f : faults_) {
      if (f.from <= g.to && f.to >= g.from - kHeartbeat) near.push_back(&f);
    }
    return near;
  };
  std::map<std::string, double> longest_by_kind;
  std::vector<std::string> i3;
  Gap longest;
  double longest_single = 0;  // the longest stretch with at most one fault acting
  for (const Gap& g : gaps) {
    const auto near = faults_near(g);
    // Put down to the fault that opened the stretch: the first one acting on it.
    const Fault* opener = near.empty() ? nullptr : near.front();
    for (const Fault* f : near) {
      if (f->from < opener->from) opener = f;
    }
    const std::string kind = opener == nullptr ? "no fault" : NameOf(opener->kind);
    longest_by_kind[kind] = std::max(longest_by_kind[kind], g.seconds());
    if (g.seconds() > longest.seconds()) longest = g;
    if (near.size() <= 1) longest_single = std::max(longest_single, g.seconds());
    const Clock::duration allowed = kI3Bound * static_cast<int>(std::max<size_t>(1, near.size()));
    if (g.to - g.from > allowed) {
      char line[200];
      std::snprintf(line, sizeof(line),
                    "shard %d waited %.2f s at +%.2f s (%zu faults acting, %.2f s allowed)",
                    g.shard, g.seconds(), Seconds(g.from - started), near.size(), Seconds(allowed));
      i3.push_back(line);
    }
  }

  // Takeover, measured: a grant event (Redis TIME in its id) to the first accepted write of its
  // fence, for grants of a shard that had waiting entries.
  std::vector<double> takeovers;
  for (const auto& e : events_) {
    auto type = e.find("type");
    if (type == e.end() || type->second != "grant") continue;
    const int64_t fence = std::atoll(e.at("fence").c_str());
    const int shard = std::atoi(e.at("shard").c_str());
    const int64_t granted_ms = std::atoll(e.at("id").c_str());
    int64_t accepted_before = 0;
    const Write* first = nullptr;
    for (const Write& w : writes) {
      if (w.shard != shard || !w.accepted) continue;
      if (w.wall_ms <= granted_ms) accepted_before = std::max(accepted_before, w.seq);
      if (w.fence == fence) {
        first = &w;
        break;
      }
    }
    if (first == nullptr || shard < 0 || shard >= kShards) continue;
    const auto& walls = produced_wall[shard];
    const bool waiting = accepted_before < static_cast<int64_t>(walls.size()) &&
                         walls[accepted_before] <= granted_ms;
    if (waiting) takeovers.push_back(static_cast<double>(first->wall_ms - granted_ms) / 1000);
  }
  std::sort(takeovers.begin(), takeovers.end());

  // Figures.
  std::map<std::string, int> fault_counts;
  for (const Fault& f : faults_) ++fault_counts[NameOf(f.kind)];
  std::string faults_text;
  for (const auto& [kind, n] : fault_counts) faults_text += " " + kind + " " + std::to_string(n);
  std::string gaps_text;
  for (const auto& [kind, s] : longest_by_kind) {
    char part[64];
    std::snprintf(part, sizeof(part), " %s %.2f s;", kind.c_str(), s);
    gaps_text += part;
  }
  const auto missing = accepted_all();
  int64_t missing_total = 0, pending_total = 0;
  for (int s = 0; s < kShards; ++s) {
    missing_total += missing[s];
    pending_total += std::max<int64_t>(0, pending(s));
  }
  std::printf("sharded chaos [%s]: faults applied %zu:%s | members spawned %d\n",
              options.name.c_str(), faults_.size(), faults_text.c_str(), incarnations_);
  std::printf(
      "sharded chaos [%s]: produced %zu in %.1f s (%.0f entries/s) | POSTs (entries) %zu | "
      "converged in "
      "%.1f s | tokens used %lld\n",
      options.name.c_str(), produced, fault_seconds, produced / fault_seconds, writes.size(),
      converge_seconds, static_cast<long long>(tokens_used));
  std::printf(
      "sharded chaos [%s]: I1 violations %zu | I4 missing %lld, pending %lld | fence rejected "
      "%lld stale POSTs | accepted redos of a previous owner's tail %lld | retries inside a "
      "token %lld\n",
      options.name.c_str(), i1.size(), static_cast<long long>(missing_total),
      static_cast<long long>(pending_total), static_cast<long long>(stale_total),
      static_cast<long long>(redone), static_cast<long long>(retries_in_token));
  std::printf(
      "sharded chaos [%s]: unprotected handler: %lld duplicates, %lld writes after a newer entry\n",
      options.name.c_str(), static_cast<long long>(duplicates),
      static_cast<long long>(out_of_order));
  std::printf(
      "sharded chaos [%s]: I3 bound %.2f s = max(session %.2f, drain %.2f) + 2 x heartbeat %.2f + "
      "min_assignment_interval %.2f + takeover %.2f (3 x command_timeout)\n",
      options.name.c_str(), Seconds(kI3Bound), Seconds(kSession), Seconds(kDrain),
      Seconds(kHeartbeat), Seconds(kMinAssignInterval), Seconds(kTakeover));
  std::printf(
      "sharded chaos [%s]: longest gap %.2f s (shard %d at +%.2f s, %zu faults acting), with one "
      "fault at most %.2f s | per fault kind:%s beyond the bound %zu | takeover measured: %zu "
      "grants, median %.3f s, max %.3f s\n",
      options.name.c_str(), longest.seconds(), longest.shard,
      longest.shard < 0 ? 0.0 : Seconds(longest.from - started),
      longest.shard < 0 ? size_t{0} : faults_near(longest).size(), longest_single,
      gaps_text.c_str(), i3.size(), takeovers.size(),
      takeovers.empty() ? 0.0 : takeovers[takeovers.size() / 2],
      takeovers.empty() ? 0.0 : takeovers.back());

  if (longest.shard >= 0) {
    for (const Fault* f : faults_near(longest)) {
      std::printf("sharded chaos [%s]:   acting on the longest gap: %s of %s, +%.2f s to +%.2f s\n",
                  options.name.c_str(), NameOf(f->kind), f->member.c_str(),
                  Seconds(f->from - started), Seconds(f->to - started));
    }
  }

  EXPECT_TRUE(converged_in_time) << "the group did not converge within 60 s";
  for (const auto& f : failures) ADD_FAILURE() << f;
  EXPECT_TRUE(i1.empty()) << i1.size() << " I1 violations, first: " << i1.front();
  EXPECT_EQ(missing_total, 0) << "I4: produced entries never accepted";
  for (int s = 0; s < kShards; ++s) {
    EXPECT_EQ(pending(s), 0) << "I4: shard " << s << "'s PEL";
    const auto [delivered, tail] = ids(s);
    EXPECT_EQ(delivered, tail) << "I4: shard " << s << "'s last-delivered id";
  }
  EXPECT_GT(faults_.size(), 0u);
  if (options.assert_i3) {
    EXPECT_TRUE(i3.empty()) << i3.size() << " I3 stretches beyond the bound, first: " << i3.front();
  }
  if (HasFailure()) {
    const std::string dir = "/tmp/sharded-chaos-" + std::to_string(seed_) + "-" + options.name;
    DumpLogs(dir);
    std::printf("sharded chaos [%s]: member logs, events and writes in %s\n", options.name.c_str(),
                dir.c_str());
  }
}

int PlainSeconds() { return EnvInt("SHARDED_CHAOS_SECONDS", EnvInt("CHAOS_SECONDS", 20)); }
int ClockSeconds() {
  return EnvInt("SHARDED_CHAOS_CLOCK_SECONDS", std::max(13, PlainSeconds() / 2));
}

TEST_F(ShardedChaosTest, FencesKeepEveryShardsLogInOrderUnderMemberFaults) {
  Run({.name = "plain", .seconds = PlainSeconds()});
}

// B10.5, B6: a lease clock at half speed makes each member's local lease last 1.6 sessions
// instead of 0.8, so a resumed or cut-off member goes on dispatching with a token the coordinator
// has already given away. Only the fence stands between those POSTs and the side-effect log.
// I3 holds too: every term of its bound is the coordinator's (sessions expire by Redis TIME) or
// the heartbeat cadence (steady clock), never the member's lease.
TEST_F(ShardedChaosTest, HalfSpeedLeaseClocksStillKeepI1AndI4) {
  Run({.name = "lease-clock-0.5",
       .seconds = ClockSeconds(),
       .env = {"STREAMCAR_TEST_LEASE_CLOCK_RATE=0.5"}});
}

// Batches inside a shard (SPEC 9, batch_size > 1): a request carries a run of the shard's
// consecutive entries, and a takeover's backlog goes out in runs of up to 10. The checks are the
// same, entry by entry: I1 (each fence's segment in order, gap-free), I3 and I4.
TEST_F(ShardedChaosTest, BatchesOfAShardsEntriesKeepI1I3AndI4) {
  Run({.name = "batched", .seconds = ClockSeconds(), .batch_size = 10});
}

// B10.5: members never read wall time for leases, so wall clocks an hour ahead and an hour behind
// (alternating per member process, so members also disagree with each other by two hours) change
// nothing.
TEST_F(ShardedChaosTest, WallClocksSkewedByAnHourChangeNothing) {
  ASSERT_TRUE(std::filesystem::exists(kLibFaketime))
      << kLibFaketime << " is missing: scripts/setup installs the faketime package";
  Run({.name = "wall-clock-skew", .seconds = ClockSeconds(), .skew_wall_clock = true});
}

}  // namespace
}  // namespace streamcar::testing
