#include "sidecar/cli/cli_support.h"

#include <atomic>
#include <iostream>

#include "sidecar/common/duration.h"
#include "sidecar/common/log.h"
#include "sidecar/config/dead_letter_default.h"
#include "sidecar/config/loader.h"
#include "sidecar/config/redis_url.h"
#include "sidecar/keys/key_slot.h"

namespace streamcar::cli {
namespace {

// Counts the masters the topology knows, for `status`.
class MastersSeen : public redis::TopologyObserver {
 public:
  void OnRedirect(redis::ReplyKind) override {}
  void OnFailover() override {}
  void OnMastersKnown(int masters) override { masters_.store(masters); }
  int masters() const { return masters_.load(); }

 private:
  std::atomic<int> masters_{1};
};

}  // namespace

std::optional<config::Config> LoadOrReport(const Arguments& args, int* exit_code) {
  auto config = config::LoadConfigFile(args.config_path);
  if (!config.ok()) {
    std::cerr << "streamcar: " << config.status().message() << "\n";
    *exit_code = 2;
    return std::nullopt;
  }
  SetLogLevel(config->log.level);  // the file's log.level wins over $STREAMCAR_LOG_LEVEL
  return std::move(*config);
}

std::unique_ptr<redis::Connection> ConnectOrReport(const config::Config& config, int* exit_code) {
  redis::ConnectionOptions options = redis::ConnectionOptionsOf(config);
  options.client_name = "streamcar-cli";
  if (options.endpoint.kind == config::RedisEndpoint::Kind::kTls && !options.tls.verify) {
    std::cerr << "streamcar: warning: TLS certificate verification is OFF (redis.tls.verify: "
                 "false)\n";
  }
  auto connection = redis::Connection::Open(options);
  if (!connection.ok()) {
    std::cerr << "streamcar: " << connection.status().message() << "\n";
    *exit_code = 1;
    return nullptr;
  }
  return std::move(*connection);
}

std::unique_ptr<CliRedis> RedisOrReport(config::Config* config, int* exit_code) {
  auto redis = std::make_unique<CliRedis>();
  redis::ConnectionOptions options = redis::ConnectionOptionsOf(*config);
  options.client_name = "streamcar-cli";
  config::RedisMode mode = config->redis.mode;
  if (mode == config::RedisMode::kStandalone || mode == config::RedisMode::kAuto) {
    // The url's node first, as always: its failure is the same one line as before.
    auto seed = ConnectOrReport(*config, exit_code);
    if (!seed) return nullptr;
    if (mode == config::RedisMode::kAuto) {
      // auto (SPEC 8) asked here, on the connection at hand: a standalone server then takes the
      // path it always took, with no topology and no extra log line. A server that refuses INFO
      // (an ACL without it) is taken as standalone, as before this mode existed.
      auto info = seed->Run(redis::Command("INFO").Arg("cluster"));
      const bool cluster =
          info.ok() && info->view().Str().find("cluster_enabled:1") != std::string_view::npos;
      mode = cluster ? config::RedisMode::kCluster : config::RedisMode::kStandalone;
    }
  }
  if (mode != config::RedisMode::kStandalone) {
    redis::TopologyOptions topology_options = redis::TopologyOptionsOf(*config);
    topology_options.mode = mode;
    for (const auto& sub : config->subscriptions) {
      topology_options.used_slots.push_back(keys::KeySlot(sub.stream));
      topology_options.used_slots.push_back(keys::KeySlot(sub.dead_letter.stream));
    }
    auto seen = std::make_shared<MastersSeen>();
    auto topology = std::shared_ptr<redis::Topology>(
        new redis::Topology(std::move(topology_options), seen.get()),
        [seen](redis::Topology* t) { delete t; });
    Status resolved = topology->Resolve(SteadyClock::now() + config->redis.connect_timeout);
    if (!resolved.ok()) {
      std::cerr << "streamcar: " << resolved.message() << "\n";
      // A configuration the servers refuse (a database on a cluster) is a usage error (SPEC 1).
      *exit_code = resolved.code() == StatusCode::kInvalid ? 2 : 1;
      return nullptr;
    }
    redis->mode = topology->mode().value_or(redis::ResolvedMode::kStandalone);
    redis->masters = seen->masters();
    if (redis->mode != redis::ResolvedMode::kStandalone) {
      if (redis->mode == redis::ResolvedMode::kCluster &&
          config->redis.mode == config::RedisMode::kAuto) {
        config::SettleDeadLetterDefaults(*config, /*cluster=*/true);
      }
      options.topology = topology;
      redis->topology = std::move(topology);
    }
  }
  redis->session = std::make_unique<redis::Session>(options, "cli", &redis->health);
  Millis retry_in{0};
  if (Status status = redis->session->ConnectOnce(&retry_in); !status.ok()) {
    std::cerr << "streamcar: " << status.message() << "\n";
    *exit_code = 1;
    return nullptr;
  }
  return redis;
}

const config::Subscription* FindSubscriptionOrReport(const config::Config& config,
                                                     const std::string& name, int* exit_code) {
  for (const auto& sub : config.subscriptions) {
    if (sub.name == name || sub.stream + "/" + sub.group == name) return &sub;
  }
  std::string known;
  for (const auto& sub : config.subscriptions) known += (known.empty() ? "" : ", ") + sub.name;
  std::cerr << "streamcar: no subscription named \"" << name << "\" in " << config.source_file
            << " (subscriptions: " << known << ")\n";
  *exit_code = 2;
  return nullptr;
}

std::string AgeOf(int64_t age_ms) {
  if (age_ms < 0) age_ms = 0;
  // Whole seconds read better than milliseconds past a few seconds.
  const int64_t rounded = age_ms >= 10'000 ? age_ms / 1000 * 1000 : age_ms;
  return FormatDuration(Millis(rounded));
}

}  // namespace streamcar::cli
