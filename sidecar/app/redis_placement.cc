#include "sidecar/app/redis_placement.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/config/dead_letter_default.h"
#include "sidecar/config/validate.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/keys/sharding_keys.h"
#include "sidecar/redis/connection.h"

namespace streamcar::app {
namespace {

// The slots of every key this process uses: a cluster map is adopted only when it serves them.
std::vector<int> UsedSlots(const config::Config& config) {
  std::vector<int> slots;
  for (const auto& sub : config.subscriptions) {
    if (sub.sharding.enabled()) {
      // The coordinator's keys, and each shard's (its stream, fence and dead letters share it).
      slots.push_back(keys::KeySlot(keys::CoordinatorKeysFor(sub.stream, sub.group).meta));
      for (int shard = 0; shard < sub.sharding.shards; ++shard) {
        slots.push_back(keys::KeySlot(keys::ShardKey(sub.ShardKeyPattern(), shard)));
      }
      continue;
    }
    slots.push_back(keys::KeySlot(sub.stream));
    // A defaulted dead-letter stream shares the stream's slot in a cluster (settled after
    // `auto` resolves; outside a cluster slots do not matter).
    if (!sub.dead_letter.stream_defaulted) slots.push_back(keys::KeySlot(sub.dead_letter.stream));
  }
  for (const auto& stream : config.streams) slots.push_back(keys::KeySlot(stream.name));
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  return slots;
}

// wait. Returns the exit code to leave with, or nullopt once resolved.
std::optional<int> ResolveTopology(redis::Topology& topology, const sigset_t& signals,
                                   Millis connect_timeout) {
  for (int failures = 0;; ++failures) {
    // One connect timeout per attempt: the log below then keeps SPEC 4.1's pace.
    const Status status = topology.Resolve(SteadyClock::now() + connect_timeout);
    if (status.ok()) return std::nullopt;
    if (status.code() == StatusCode::kInvalid) {  // auto met a cluster the config cannot use
      LogError("configuration error: " + status.message(), {{"exit_code", 2}});
      return 2;
    }
    if (status.code() == StatusCode::kFatal) {
      LogError("fatal: " + status.message(), {{"exit_code", 1}});
      return 1;
    }
    const Millis retry_in = ReconnectDelay(failures, Millis(100), Millis(5000), UnitRandom());
    // The words every connection uses for this (operators and their alerts know them).
    LogWarn("redis unreachable, retrying",
            {{"role", "topology"},
             {"error", status.message()},
             {"retry_in_ms", static_cast<int64_t>(retry_in.count())}});
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(retry_in);
    const timespec wait{static_cast<time_t>(seconds.count()),
                        static_cast<long>((retry_in - seconds).count() * 1000000)};
    const int received = sigtimedwait(&signals, nullptr, &wait);
    if (received == SIGTERM || received == SIGINT) {
      LogInfo("shutdown complete", {{"left_pending", int64_t{0}}, {"drained", true}});
      return 0;
    }
  }
}

// The kFatal error of a key the server hashes otherwise than streamcar (`server_slot`).
Status SlotDisagreement(const config::Subscription& sub, const std::string& key,
                        int64_t server_slot, int slot) {
  return Status(StatusCode::kFatal, "subscription " + sub.name + ": Redis puts key \"" + key +
                                        "\" in slot " + std::to_string(server_slot) +
                                        ", streamcar computed " + std::to_string(slot) +
                                        " (a proxy between us and the cluster?)");
}

// SHARDING.md B1: each shard's stream, fence and dead-letter keys must share one slot (every
// fenced script touches them together; a cluster refuses a script whose keys span slots, so the
// shard would never be read). Asked of the server with CLUSTER KEYSLOT (`connection`; null:
// streamcar's own hashing only), a page of shards per pipeline. A split is the configuration's
// (kInvalid, exit 2, naming the subscription, the shard and its keys); the server hashing
// otherwise than streamcar is kFatal, as for a plain subscription.
Status CheckShardSlots(const config::Subscription& sub, const std::string& path,
                       redis::Connection* connection) {
  constexpr int kShardsPerPipeline = 256;
  const std::string pattern = sub.ShardKeyPattern();
  for (int first = 0; first < sub.sharding.shards; first += kShardsPerPipeline) {
    const int last = std::min(sub.sharding.shards, first + kShardsPerPipeline);
    std::vector<std::array<std::string, 3>> keys;
    std::vector<redis::Command> asks;
    for (int shard = first; shard < last; ++shard) {
      const std::string stream = keys::ShardKey(pattern, shard);
      keys.push_back({stream, keys::FenceKey(stream, sub.group), keys::ShardDeadLetterKey(stream)});
      for (const auto& key : keys.back()) {
        asks.push_back(redis::Command("CLUSTER").Arg("KEYSLOT").Arg(key));
      }
    }
    std::vector<redis::Reply> replies;
    if (connection != nullptr) {
      auto answered = connection->RunPipeline(asks);
      if (answered.ok()) {
        replies = std::move(*answered);
      } else {
        LogWarn(
            "cannot check the shards' slots with CLUSTER KEYSLOT now; using streamcar's own "
            "hashing",
            {{"subscription", sub.name}, {"error", answered.status().message()}});
        connection = nullptr;
      }
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      std::array<int, 3> slots{};
      for (size_t k = 0; k < 3; ++k) {
        slots[k] = keys::KeySlot(keys[i][k]);
        if (replies.empty()) continue;
        const auto& reply = replies[i * 3 + k];
        if (reply.view().IsInteger() && reply.view().Integer() != slots[k]) {
          return SlotDisagreement(sub, keys[i][k], reply.view().Integer(), slots[k]);
        }
      }
      if (slots[0] == slots[1] && slots[0] == slots[2]) continue;
      const auto named = [&](size_t k) {
        return "\"" + keys[i][k] + "\" (slot " + std::to_string(slots[k]) + ")";
      };
      return Status(StatusCode::kInvalid,
                    path + ".sharding.key_pattern: subscription " + sub.name + ", shard " +
                        std::to_string(first + static_cast<int>(i)) +
                        ": its stream, fence and dead-letter keys " + named(0) + ", " + named(1) +
                        " and " + named(2) +
                        " are in different slots of the cluster; put %d inside a hash tag, like "
                        "\"" +
                        sub.stream + ":{%d}\" (got \"" + pattern + "\")");
    }
  }
  // Mode auto met a cluster: the pattern rule `check` applies to mode cluster holds too.
  if (std::string why = config::ClusterKeyPatternProblem(sub); !why.empty()) {
    return Status(StatusCode::kInvalid, path + ".sharding.key_pattern: " + why);
  }
  LogInfo("shard slots", {{"subscription", sub.name},
                          {"shards", int64_t{sub.sharding.shards}},
                          {"key_pattern", pattern},
                          {"checked_by", connection != nullptr ? "CLUSTER KEYSLOT" : "streamcar"}});
  return Status::Ok();
}

// SPEC 8: in a cluster, checks each subscription's slots with the server's CLUSTER KEYSLOT (a
// proxy or a server that hashes otherwise would break every multi-key step) and logs which
// dead-letter path it takes. Returns the subscriptions whose dead letters take the two-step path;
// an error when the server disagrees with our hashing (kFatal) or a sharded subscription's keys
// cannot serve a cluster (kInvalid: a configuration error).
StatusOr<std::vector<bool>> CheckClusterSlots(const config::Config& config,
                                              const redis::ConnectionOptions& options) {
  std::vector<bool> two_step;
  for (size_t index = 0; index < config.subscriptions.size(); ++index) {
    const auto& sub = config.subscriptions[index];
    if (sub.sharding.enabled()) {
      // A shard's dead letters are its own, in its slot: never the two-step path.
      two_step.push_back(false);
      auto at = options;
      at.slot = keys::KeySlot(keys::ShardKey(sub.ShardKeyPattern(), 0));
      at.client_name = redis::ClientName(config.consumer_name, {"start"});
      auto connection = redis::Connection::Open(at);
      if (!connection.ok()) {
        LogWarn("cannot check the slots with CLUSTER KEYSLOT now; using streamcar's own hashing",
                {{"subscription", sub.name}, {"error", connection.status().message()}});
      }
      const std::string path = "subscriptions[" + std::to_string(index) + "]";
      if (Status s = CheckShardSlots(sub, path, connection.ok() ? connection->get() : nullptr);
          !s.ok()) {
        return s;
      }
      continue;
    }
    const int stream_slot = keys::KeySlot(sub.stream);
    const int dlq_slot = keys::KeySlot(sub.dead_letter.stream);
    auto at = options;
    at.slot = stream_slot;
    at.client_name = redis::ClientName(config.consumer_name, {"start"});
    auto connection = redis::Connection::Open(at);
    if (connection.ok()) {
      for (const auto& [key, slot] :
           {std::pair{sub.stream, stream_slot}, std::pair{sub.dead_letter.stream, dlq_slot}}) {
        auto reply = (*connection)->Run(redis::Command("CLUSTER").Arg("KEYSLOT").Arg(key));
        if (reply.ok() && reply->view().IsInteger() && reply->view().Integer() != slot) {
          return SlotDisagreement(sub, key, reply->view().Integer(), slot);
        }
      }
    } else {
      LogWarn("cannot check the slots with CLUSTER KEYSLOT now; using streamcar's own hashing",
              {{"subscription", sub.name}, {"error", connection.status().message()}});
    }
    two_step.push_back(stream_slot != dlq_slot);
    LogInfo("dead-letter path", {{"subscription", sub.name},
                                 {"path", stream_slot == dlq_slot ? "atomic" : "two-step"},
                                 {"stream", sub.stream},
                                 {"stream_slot", int64_t{stream_slot}},
                                 {"dead_letter_stream", sub.dead_letter.stream},
                                 {"dlq_slot", int64_t{dlq_slot}}});
  }
  return two_step;
}

}  // namespace

std::optional<int> PlaceRedis(config::Config& config, const redis::ConnectionOptions& url_options,
                              const sigset_t& signals, admin::Metrics& metrics,
                              RedisPlacement& placement) {
  placement.options = url_options;
  placement.two_step_dead_letters.assign(config.subscriptions.size(), false);
  // An explicit standalone needs no topology: every connection goes to the url, as always.
  if (config.redis.mode != config::RedisMode::kStandalone) {
    auto topology_options = redis::TopologyOptionsOf(config);
    topology_options.used_slots = UsedSlots(config);
    auto& topology = placement.topology;
    topology = std::make_shared<redis::Topology>(std::move(topology_options), &metrics);
    if (auto exit_code = ResolveTopology(*topology, signals, config.redis.connect_timeout)) {
      return exit_code;
    }
    const redis::ResolvedMode mode = *topology->mode();
    if (mode == redis::ResolvedMode::kStandalone) {
      topology.reset();  // nor does a server that `auto` finds standalone
    } else {
      config::SettleDeadLetterDefaults(config, mode == redis::ResolvedMode::kCluster);
      topology->Start();
      placement.options.topology = topology;
      placement.ready_topology.store(topology.get());
      LogInfo("redis topology", {{"mode", redis::ResolvedModeName(mode)}});
      if (mode == redis::ResolvedMode::kCluster) {
        auto two_step = CheckClusterSlots(config, placement.options);
        if (!two_step.ok()) {
          // As ResolveTopology says it: a configuration this cluster cannot serve is exit 2.
          const bool invalid = two_step.status().code() == StatusCode::kInvalid;
          LogError((invalid ? "configuration error: " : "fatal: ") + two_step.status().message(),
                   {{"exit_code", invalid ? 2 : 1}});
          return invalid ? 2 : 1;
        }
        placement.two_step_dead_letters = std::move(*two_step);
      }
    }
  }
  if (placement.topology == nullptr) metrics.OnMastersKnown(1);
  return std::nullopt;
}

std::string NoMasterFor(const config::Config& config, const redis::Topology* topology) {
  if (topology == nullptr) return "";
  for (const auto& sub : config.subscriptions) {
    // A sharded subscription needs its coordinator first: its shards move with the group.
    const std::string key =
        sub.sharding.enabled() ? keys::CoordinatorKeysFor(sub.stream, sub.group).meta : sub.stream;
    const int slot = keys::KeySlot(key);
    if (!topology->KnownMasterFor(slot)) {
      return std::string("no Redis master known for ") +
             (sub.sharding.enabled() ? "coordinator key " : "stream ") + key + " (slot " +
             std::to_string(slot) + ")";
    }
  }
  return "";
}

// Learns the deployment's topology before anything connects (SPEC 8). While Redis cannot be
// reached this retries with backoff, as every connection does (SPEC 4.1), and a SIGTERM ends the
}  // namespace streamcar::app
