// The sharded mode's Redis cost (SHARDING.md B4.2, B5), on a redis-server bench/run starts:
//   heartbeat  S M: M members settle on S shards; then the Redis time (INFO commandstats) of a
//              steady heartbeat, and of the heartbeat that recomputes the target when one more
//              member joins.
//   fenced     N BATCH: N entries drained by one connection with XREADGROUP + XACK, then the same
//              N with the fenced read (the watched transaction the runtime makes) and the fenced
//              ack script, then with the read as one script; entries/s of each and the ratios.
// Prints one JSON object per line.
// Usage: sharding_bench PORT heartbeat S M | sharding_bench PORT fenced N BATCH

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sidecar/keys/sharding_keys.h"
#include "sidecar/redis/connection.h"
#include "sidecar/sharding/fenced_ops.h"
#include "sidecar/sharding/fenced_script.h"
#include "sidecar/sharding/heartbeat.h"
#include "sidecar/sharding/heartbeat_script.h"
#include "sidecar/sharding/membership.h"

namespace {

using streamcar::Millis;
using streamcar::redis::Command;
using streamcar::redis::Connection;
namespace sharding = streamcar::sharding;
namespace keys = streamcar::keys;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "sharding_bench: %s\n", what.c_str());
  std::exit(1);
}

streamcar::redis::Reply Run(Connection& redis, const Command& command) {
  auto reply = redis.Run(command);
  if (!reply.ok()) Fail(reply.status().message());
  return std::move(*reply);
}

// "cmdstat_evalsha:calls=...,usec=...,usec_per_call=..." -> usec per call.
double EvalshaMicros(Connection& redis) {
  auto info = Run(redis, Command("INFO").Arg("commandstats"));
  const std::string text(info.view().Str());
  const size_t at = text.find("cmdstat_evalsha:");
  if (at == std::string::npos) return 0;
  const size_t per_call = text.find("usec_per_call=", at);
  return std::stod(text.substr(per_call + 14));
}

// A member (the real state machine) whose runtime does at once what it is told: the bench
// measures Redis, not a member's takeover or drain.
class BenchMember {
 public:
  BenchMember(std::string id, int shards)
      : membership_({.member_id = std::move(id),
                     .shard_count = shards,
                     .initial_delay = Millis(0),
                     .min_assignment_interval = Millis(0)},
                    streamcar::SystemClock::Instance()) {}

  // One heartbeat, with every shard's progress, and the runtime's instant answer to it.
  void Beat(Connection& redis, const keys::CoordinatorKeys& keys) {
    std::vector<sharding::ShardProgress> progress;
    for (const auto& [shard, state] : membership_.shards())
      progress.push_back({shard, "1-0", 0, 0});
    auto reply = Run(redis, sharding::HeartbeatCommand(keys, membership_.NextRequest(progress)));
    auto parsed = sharding::ParseHeartbeatReply(reply.view());
    if (!parsed.ok()) Fail(parsed.status().message());
    const sharding::MemberActions actions = membership_.OnReply(*parsed);
    for (const auto& grant : actions.start) membership_.ShardStarted(grant.shard);
    for (int shard : actions.drain) membership_.ShardDrained(shard);
  }
  bool Stable() const { return membership_.state() == sharding::MemberState::kStable; }

 private:
  sharding::Membership membership_;
};

void HeartbeatCost(Connection& redis, int shards, int members) {
  const auto keys = keys::CoordinatorKeysFor("bench-" + std::to_string(shards), "g");
  std::vector<BenchMember> group;
  for (int i = 0; i < members; ++i) group.emplace_back("member-" + std::to_string(i), shards);
  for (int round = 0; round < 50; ++round) {
    bool stable = true;
    for (BenchMember& member : group) {
      member.Beat(redis, keys);
      stable &= member.Stable();
    }
    if (stable && round > 0) break;
  }
  Run(redis, Command("CONFIG").Arg("RESETSTAT"));
  const int beats = 20 * members;
  for (int i = 0; i < beats; ++i) group[static_cast<size_t>(i % members)].Beat(redis, keys);
  const double steady = EvalshaMicros(redis);
  BenchMember joiner("joiner", shards);
  Run(redis, Command("CONFIG").Arg("RESETSTAT"));
  joiner.Beat(redis, keys);
  const double target = EvalshaMicros(redis);
  std::printf(
      "{\"shards\": %d, \"members\": %d, \"steady_heartbeat_us\": %.1f, "
      "\"target_heartbeat_us\": %.1f}\n",
      shards, members, steady, target);
}

void Preload(Connection& redis, const std::string& key, int entries) {
  for (int done = 0; done < entries;) {
    std::vector<Command> batch;
    for (int i = 0; i < 1000 && done < entries; ++i, ++done) {
      batch.push_back(std::move(Command("XADD")
                                    .Arg(key)
                                    .Arg("*")
                                    .Arg("n")
                                    .Arg(int64_t{done})
                                    .Arg("data")
                                    .Arg(std::string(64, 'x'))));
    }
    auto replies = redis.RunPipeline(batch);
    if (!replies.ok()) Fail(replies.status().message());
  }
}

double Rate(int entries, std::chrono::steady_clock::time_point start) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return entries / seconds;
}

// Drains `entries` preloaded entries of a fresh shard stream with the fenced read `read` (one
// call: the installed token's read of up to `batch` new entries) and the fenced ack script;
// entries/s.
double DrainFenced(
    Connection& redis, const std::string& key, int entries,
    const std::function<sharding::FencedRead(const sharding::FencedShardOps&)>& read) {
  Preload(redis, key, entries);
  sharding::FencedShardOps ops(key, "g", "c", 1, "m", 1);
  Run(redis, ops.EnsureGroup("0"));
  int drained = 0;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const sharding::FencedRead taken = read(ops);
    if (taken.entries.empty()) break;
    std::vector<std::string> ids;
    for (const auto& entry : taken.entries) ids.push_back(entry.id);
    Run(redis, ops.Ack(ids, streamcar::redis::AckMode::kAckOnly).commands[0]);
    drained += static_cast<int>(ids.size());
  }
  if (drained != entries) Fail("not every entry was drained from " + key);
  return Rate(drained, start);
}

void FencedAgainstPlain(Connection& redis, int entries, int batch) {
  const std::string plain_key = "bench-plain";
  Preload(redis, plain_key, entries);
  Run(redis, Command("XGROUP").Arg("CREATE").Arg(plain_key).Arg("g").Arg("0"));

  int drained = 0;
  auto start = std::chrono::steady_clock::now();
  while (true) {
    auto read = Run(redis, Command("XREADGROUP")
                               .Arg("GROUP")
                               .Arg("g")
                               .Arg("c")
                               .Arg("COUNT")
                               .Arg(int64_t{batch})
                               .Arg("STREAMS")
                               .Arg(plain_key)
                               .Arg(">"));
    if (read.view().IsNil()) break;
    // Parsed into entries as the fenced read's reply is below (and as the runtime does both).
    auto entries = streamcar::redis::SubscriptionOps::ParseRead(read.view());
    if (!entries.ok()) Fail("plain read: " + entries.status().message());
    Command ack("XACK");
    ack.Arg(plain_key).Arg("g");
    for (const auto& entry : *entries) ack.Arg(entry.id);
    Run(redis, ack);
    drained += static_cast<int>(entries->size());
  }
  const double plain = Rate(drained, start);

  for (const auto* script : sharding::FencedScripts()) Run(redis, script->Load());
  // What the runtime does (FencedShardOps::WatchFence, then ReadWatched: two round trips).
  const double fenced = DrainFenced(redis, "bench-fenced", entries, [&](const auto& ops) {
    auto watched = redis.RunPipeline(ops.WatchFence());
    if (!watched.ok()) Fail(watched.status().message());
    if (auto check = ops.CheckFence(*watched); !check.status.ok()) Fail(check.status.message());
    auto read = redis.RunPipeline(ops.ReadWatched(batch));
    if (!read.ok()) Fail(read.status().message());
    auto parsed = sharding::FencedShardOps::ParseWatchedRead(*read);
    if (!parsed.ok() || !parsed->has_value()) Fail("the watched read ran nothing");
    return std::move(**parsed);
  });
  // The same read as one script (FencedShardOps::ReadNew, B5's `read`): every entry passes
  // through Lua.
  const double script = DrainFenced(redis, "bench-script", entries, [&](const auto& ops) {
    auto read =
        sharding::FencedShardOps::ParseFencedRead(Run(redis, ops.ReadNew(batch, {})).view());
    if (!read.ok()) Fail("script read: " + read.status().message());
    return std::move(*read);
  });
  if (drained != entries) Fail("not every entry was drained");
  std::printf(
      "{\"entries\": %d, \"batch\": %d, \"plain_per_s\": %.0f, \"fenced_per_s\": %.0f, "
      "\"ratio\": %.3f, \"script_per_s\": %.0f, \"script_ratio\": %.3f}\n",
      entries, batch, plain, fenced, fenced / plain, script, script / plain);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: sharding_bench PORT heartbeat S M | PORT fenced N BATCH\n");
    return 2;
  }
  streamcar::redis::ConnectionOptions options;
  options.endpoint.host = "127.0.0.1";
  options.endpoint.port = std::atoi(argv[1]);
  auto connection = Connection::Open(options);
  if (!connection.ok()) Fail(connection.status().message());
  Run(**connection, sharding::HeartbeatScript().Load());
  const std::string mode = argv[2];
  if (mode == "heartbeat") {
    HeartbeatCost(**connection, std::atoi(argv[3]), std::atoi(argv[4]));
  } else if (mode == "fenced") {
    FencedAgainstPlain(**connection, std::atoi(argv[3]), std::atoi(argv[4]));
  } else {
    Fail("unknown mode " + mode);
  }
}
