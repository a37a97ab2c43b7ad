// The sharded mode's Redis cost (SHARDING.md B4.2, B5), on a redis-server bench/run starts:
//   heartbeat  S M: M members settle on S shards; then the Redis time (INFO commandstats) of a
//              steady heartbeat, and of the heartbeat that recomputes the target when one more
//              member joins.
//   fenced     N BATCH: N entries drained by one connection with XREADGROUP + XACK, then the same
//              N with the fenced read + ack scripts; entries/s of each and the ratio.
// Prints one JSON object per line.
// Usage: sharding_bench PORT heartbeat S M | sharding_bench PORT fenced N BATCH

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "sidecar/redis/connection.h"
#include "sidecar/sharding/fenced_ops.h"
#include "sidecar/sharding/fenced_script.h"
#include "sidecar/sharding/heartbeat.h"
#include "sidecar/sharding/heartbeat_script.h"

namespace {

using streamcar::Millis;
using streamcar::redis::Command;
using streamcar::redis::Connection;
namespace sharding = streamcar::sharding;

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

// A member that does at once what it is told: the bench measures Redis, not a member's drain.
struct BenchMember {
  std::string id;
  int64_t epoch = sharding::kJoinEpoch;
  int64_t metadata_version = 0;
  std::vector<int> running;
  std::vector<int> revoked;

  sharding::HeartbeatRequest Request(int shards) const {
    sharding::HeartbeatRequest request;
    request.member_id = id;
    request.member_epoch = epoch;
    request.owned = running;
    for (int shard : revoked) request.revoking.emplace_back(shard, sharding::RevokeState::kRevoked);
    request.metadata_version = metadata_version;
    request.shard_count = shards;
    request.initial_delay = Millis(0);
    request.min_assignment_interval = Millis(0);
    for (int shard : running) request.progress.push_back({shard, "1-0", 0, 0});
    return request;
  }
  // OK: run exactly the listed shards. Anything else: keep only the listed shards it runs.
  // Every other shard is revoked at once and reported in the next request.
  void Apply(const sharding::HeartbeatReply& reply) {
    const bool ok = reply.status == sharding::HeartbeatStatus::kOk;
    std::vector<int> listed;
    for (const auto& grant : reply.assigned) listed.push_back(grant.shard);
    auto is_listed = [&](int shard) { return std::ranges::find(listed, shard) != listed.end(); };
    revoked.clear();
    for (int shard : running) {
      if (!is_listed(shard)) revoked.push_back(shard);
    }
    if (ok) {
      epoch = reply.member_epoch;
      running = listed;
    } else {
      std::erase_if(running, [&](int shard) { return !is_listed(shard); });
    }
    if (ok || reply.status == sharding::HeartbeatStatus::kRevokePending ||
        reply.status == sharding::HeartbeatStatus::kSyncMetadata) {
      metadata_version = reply.metadata_version;
    }
  }
};

sharding::HeartbeatReply Beat(Connection& redis, const sharding::CoordinatorKeys& keys,
                              BenchMember& member, int shards) {
  auto reply = Run(redis, sharding::HeartbeatCommand(keys, member.Request(shards)));
  auto parsed = sharding::ParseHeartbeatReply(reply.view());
  if (!parsed.ok()) Fail(parsed.status().message());
  member.Apply(*parsed);
  return *parsed;
}

void HeartbeatCost(Connection& redis, int shards, int members) {
  const auto keys = sharding::CoordinatorKeysFor("bench-" + std::to_string(shards), "g");
  std::vector<BenchMember> group(static_cast<size_t>(members));
  for (int i = 0; i < members; ++i)
    group[static_cast<size_t>(i)].id = "member-" + std::to_string(i);
  for (BenchMember& member : group) Beat(redis, keys, member, shards);
  for (int round = 0; round < 20; ++round) {
    bool changed = false;
    for (BenchMember& member : group) {
      auto before = member.running;
      Beat(redis, keys, member, shards);
      changed |= before != member.running || !member.revoked.empty();
    }
    if (!changed) break;
  }
  Run(redis, Command("CONFIG").Arg("RESETSTAT"));
  const int beats = 20 * members;
  for (int i = 0; i < beats; ++i)
    Beat(redis, keys, group[static_cast<size_t>(i % members)], shards);
  const double steady = EvalshaMicros(redis);
  BenchMember joiner{.id = "joiner"};
  Run(redis, Command("CONFIG").Arg("RESETSTAT"));
  Beat(redis, keys, joiner, shards);
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

void FencedAgainstPlain(Connection& redis, int entries, int batch) {
  const std::string plain_key = "bench-plain", fenced_key = "bench-fenced";
  Preload(redis, plain_key, entries);
  Preload(redis, fenced_key, entries);
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
    auto list = read.view()[0][1];
    Command ack("XACK");
    ack.Arg(plain_key).Arg("g");
    for (size_t i = 0; i < list.Size(); ++i) ack.Arg(list[i][0].Str());
    Run(redis, ack);
    drained += static_cast<int>(list.Size());
  }
  const double plain = Rate(drained, start);

  sharding::FencedOps ops(fenced_key, "g", "c");
  Run(redis, sharding::FencedScript().Load());
  auto installed =
      sharding::FencedOps::ParseInstall(Run(redis, ops.Install(1, "m", 1, "0")).view());
  if (!installed.ok() || !installed->done()) Fail("install");
  int fenced_drained = 0;
  start = std::chrono::steady_clock::now();
  while (true) {
    auto read = sharding::FencedOps::ParseRead(Run(redis, ops.Read(1, batch)).view());
    if (!read.ok() || !read->done()) Fail("fenced read");
    if (read->value.entries.empty()) break;
    std::vector<std::string> ids;
    for (const auto& entry : read->value.entries) ids.push_back(entry.id);
    auto acked = sharding::FencedOps::ParseAck(
        Run(redis, ops.Ack(1, ids, streamcar::redis::AckMode::kAckOnly)).view());
    if (!acked.ok() || !acked->done()) Fail("fenced ack");
    fenced_drained += static_cast<int>(ids.size());
  }
  const double fenced = Rate(fenced_drained, start);
  if (drained != entries || fenced_drained != entries) Fail("not every entry was drained");
  std::printf(
      "{\"entries\": %d, \"batch\": %d, \"plain_per_s\": %.0f, \"fenced_per_s\": %.0f, "
      "\"ratio\": %.3f}\n",
      entries, batch, plain, fenced, fenced / plain);
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
