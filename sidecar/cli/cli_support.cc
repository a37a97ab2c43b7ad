#include "sidecar/cli/cli_support.h"

#include <iostream>

#include "sidecar/common/duration.h"
#include "sidecar/config/loader.h"
#include "sidecar/config/redis_url.h"

namespace streamcar::cli {

std::optional<config::Config> LoadOrReport(const Arguments& args, int* exit_code) {
  auto config = config::LoadConfigFile(args.config_path);
  if (!config.ok()) {
    std::cerr << "streamcar: " << config.status().message() << "\n";
    *exit_code = 2;
    return std::nullopt;
  }
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
