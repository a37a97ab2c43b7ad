#include "sidecar/config/validate.h"

#include <set>
#include <utility>

namespace streamcar::config {

namespace {

// SPEC section 10: `streams`, `api` and `archive`. Single keys were checked while loading.
bool ValidateLogApi(const Config& config, const ProblemSink& problem) {
  std::set<std::string> names;
  for (size_t i = 0; i < config.streams.size(); ++i) {
    const auto& stream = config.streams[i];
    const std::string path = "streams[" + std::to_string(i) + "]";
    if (!names.insert(stream.name).second) {
      problem(path + ".name", "stream \"" + stream.name + "\" is listed by an earlier stream");
      return false;
    }
    if (stream.archive && config.archive.url.empty()) {
      problem(path + ".archive",
              "archive: true needs archive.url (sqlite:///path or postgres://...)");
      return false;
    }
    if (stream.archive && stream.max_len > 0) {
      // An archived stream is trimmed only by its folder (retention), never by XADD MAXLEN:
      // a capped XADD would drop entries that were never archived.
      problem(path + ".max_len",
              "stream \"" + stream.name +
                  "\" has archive: true; max_len would trim entries before they are archived "
                  "(use retention.max_len, which folds them first)");
      return false;
    }
  }
  if (!config.api.listen.empty() && config.api.listen == config.admin.listen) {
    problem("api.listen", "must differ from admin.listen (" + config.admin.listen + ")");
    return false;
  }
  return true;
}

// True when the url reaches Redis over TCP (with or without TLS), as cluster nodes and a master
// named by sentinels are reached.
bool OverTcp(const RedisConfig& redis) { return redis.endpoint.kind != RedisEndpoint::Kind::kUnix; }

// SPEC 8: redis.mode, redis.nodes and redis.sentinel together. Each key alone was checked while
// loading (the mode's name, each address).
bool ValidateTopology(const RedisConfig& redis, const ProblemSink& problem) {
  const std::string mode = RedisModeName(redis.mode);
  const SentinelConfig& sentinel = redis.sentinel;
  if (redis.mode != RedisMode::kSentinel) {
    // Empty values are fine: a chart passes ${VAR:-} whatever the mode.
    const std::pair<const char*, bool> keys[] = {{"master", !sentinel.master.empty()},
                                                 {"addresses", !sentinel.addresses.empty()},
                                                 {"username", !sentinel.username.empty()},
                                                 {"password", !sentinel.password.empty()}};
    for (const auto& [key, set] : keys) {
      if (!set) continue;
      problem(std::string("redis.sentinel.") + key,
              "only with mode: sentinel (mode is " + mode + ")");
      return false;
    }
  }
  switch (redis.mode) {
    case RedisMode::kCluster:
      if (!OverTcp(redis)) {
        problem("redis.url",
                "a cluster is reached over TCP: mode: cluster needs a redis:// or rediss:// url");
        return false;
      }
      if (redis.endpoint.db != 0) {
        problem("redis.url", "database " + std::to_string(redis.endpoint.db) +
                                 ": a cluster has only database 0");
        return false;
      }
      break;
    case RedisMode::kSentinel:
      if (sentinel.master.empty()) {
        problem("redis.sentinel.master",
                "required with mode: sentinel (the name the sentinels monitor the master by)");
        return false;
      }
      if (sentinel.addresses.empty()) {
        problem("redis.sentinel.addresses",
                "required with mode: sentinel (host:port of each sentinel)");
        return false;
      }
      if (!OverTcp(redis)) {
        problem("redis.url",
                "the master the sentinels name is reached over TCP: mode: sentinel needs a "
                "redis:// or rediss:// url (its scheme, database and credentials apply; its host "
                "and port are not used)");
        return false;
      }
      break;
    case RedisMode::kAuto:
    case RedisMode::kStandalone:
      break;
  }
  if (!redis.nodes.empty()) {
    if (redis.mode == RedisMode::kStandalone || redis.mode == RedisMode::kSentinel) {
      problem("redis.nodes", "cluster seed nodes: only with mode: cluster or auto (mode is " +
                                 mode +
                                 (redis.mode == RedisMode::kSentinel
                                      ? "; the sentinels go in redis.sentinel.addresses)"
                                      : ")"));
      return false;
    }
    if (!OverTcp(redis)) {
      problem("redis.nodes",
              "cluster seed nodes need a redis:// or rediss:// url: a cluster is reached over TCP");
      return false;
    }
  }
  if (!sentinel.username.empty() && sentinel.password.empty()) {
    problem("redis.sentinel.username",
            "needs redis.sentinel.password (the sentinels' AUTH takes both)");
    return false;
  }
  return true;
}

}  // namespace

void ValidateConfig(const Config& config, const ProblemSink& problem) {
  if (config.subscriptions.empty() && config.streams.empty()) {
    problem("subscriptions",
            "at least one subscription is required (or a `streams` list for the log API)");
    return;
  }
  if (!ValidateLogApi(config, problem)) return;
  std::set<std::pair<std::string, std::string>> stream_groups;
  std::set<std::string> names;
  for (size_t i = 0; i < config.subscriptions.size(); ++i) {
    const auto& sub = config.subscriptions[i];
    const std::string path = "subscriptions[" + std::to_string(i) + "]";
    if (!stream_groups.insert({sub.stream, sub.group}).second) {
      problem(path, "stream \"" + sub.stream + "\" with group \"" + sub.group +
                        "\" is already subscribed by an earlier subscription");
      return;
    }
    if (!names.insert(sub.name).second) {
      problem(path + ".name", "name \"" + sub.name + "\" is used by an earlier subscription");
      return;
    }
    if (sub.handler.url.empty()) {
      problem(path + ".handler.url", "required (set it here or in defaults.handler.url)");
      return;
    }
    if (sub.handler.batch_size > 1 && sub.handler.format != Format::kJson) {
      problem(path + ".handler.batch_size",
              "batch delivery (batch_size > 1) needs format: json (format is " +
                  std::string(FormatName(sub.handler.format)) + ")");
      return;
    }
    if (sub.handler.format == Format::kRaw && sub.handler.raw_field.empty()) {
      problem(path + ".handler.raw_field", "required with format: raw");
      return;
    }
    if (sub.retry.max_backoff < sub.retry.initial_backoff) {
      problem(path + ".retry.max_backoff", "must not be below retry.initial_backoff");
      return;
    }
    if (sub.ack.delete_entries) {
      bool archived = false;
      for (const auto& stream : config.streams)
        archived |= stream.archive && stream.name == sub.stream;
      if (archived) {
        // XDEL on ack would remove entries before the archive folder has folded them.
        problem(path + ".ack.delete",
                "subscription \"" + sub.name + "\" deletes acknowledged entries of stream \"" +
                    sub.stream +
                    "\", which is archived (streams: archive: true): entries would be lost "
                    "before they are folded; drop ack.delete (retention trims after folding)");
        return;
      }
    }
    if (sub.dead_letter.stream == sub.stream) {
      problem(path + ".dead_letter.stream", "must differ from the subscription's stream");
      return;
    }
  }
  const auto& tls = config.redis.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    problem(tls.cert_file.empty() ? "redis.tls.cert_file" : "redis.tls.key_file",
            "cert_file and key_file go together (mutual TLS needs both)");
    return;
  }
  if (!ValidateTopology(config.redis, problem)) return;
}

}  // namespace streamcar::config
