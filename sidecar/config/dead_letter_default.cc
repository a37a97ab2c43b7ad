#include "sidecar/config/dead_letter_default.h"

#include "sidecar/keys/stream_keys.h"

namespace streamcar::config {

void FillDeadLetterDefaults(Config* config) {
  const RedisMode mode = config->redis.mode;
  for (auto& sub : config->subscriptions) {
    if (!sub.dead_letter.stream.empty()) continue;
    sub.dead_letter.stream_defaulted = true;
    sub.dead_letter.stream = keys::DefaultDeadLetterStream(sub.stream, mode == RedisMode::kCluster);
    if (mode != RedisMode::kAuto) continue;
    std::string if_cluster = keys::DefaultDeadLetterStream(sub.stream, /*cluster=*/true);
    if (if_cluster != sub.dead_letter.stream) sub.dead_letter.stream_if_cluster = if_cluster;
  }
}

void SettleDeadLetterDefaults(Config& config, bool cluster) {
  for (auto& sub : config.subscriptions) {
    if (!sub.dead_letter.stream_defaulted) continue;
    sub.dead_letter.stream = keys::DefaultDeadLetterStream(sub.stream, cluster);
    sub.dead_letter.stream_if_cluster.clear();
  }
}

}  // namespace streamcar::config
