#include "sidecar/config/validate.h"

#include <map>
#include <set>
#include <utility>

#include "sidecar/common/duration.h"
#include "sidecar/common/text.h"
#include "sidecar/common/url.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/keys/sharding_keys.h"

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
  // A stream split into shards (SPEC 9) is appended to by shard; it has no single key to read,
  // trim or archive.
  std::map<std::string, std::pair<std::string, const Subscription*>> sharded;  // stream -> pattern
  for (const auto& sub : config.subscriptions) {
    if (!sub.sharding.enabled()) continue;
    auto [it, inserted] = sharded.emplace(sub.stream, std::make_pair(sub.ShardKeyPattern(), &sub));
    const Subscription& first = *it->second.second;
    if (!inserted && (first.sharding.shards != sub.sharding.shards ||
                      it->second.first != sub.ShardKeyPattern())) {
      problem("subscriptions", "subscriptions \"" + first.name + "\" and \"" + sub.name +
                                   "\" shard stream \"" + sub.stream +
                                   "\" differently (shards and key_pattern must agree)");
      return false;
    }
  }
  for (size_t i = 0; i < config.streams.size(); ++i) {
    const auto& stream = config.streams[i];
    if (!sharded.contains(stream.name)) continue;
    const std::string path = "streams[" + std::to_string(i) + "]";
    if (stream.archive || stream.retention.enabled()) {
      problem(path + (stream.archive ? ".archive" : ".retention"),
              "stream \"" + stream.name +
                  "\" is sharded (SPEC 9): its entries live in its shard streams, which the "
                  "subscription's own retention trims; remove this from the log API stream");
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

std::string Show(Millis value) { return FormatDuration(value); }

// SHARDING.md B6.1: stalled owners. `at` is "subscriptions[i].sharding.".
bool ValidateStall(const Subscription& sub, const std::string& at, const ProblemSink& problem) {
  const ShardingConfig& sharding = sub.sharding;
  if (sharding.revoke_stalled && sharding.stall_timeout.count() == 0) {
    problem(at + "revoke_stalled",
            "needs " + at + "stall_timeout: without it no shard is ever judged stalled");
    return false;
  }
  return true;
}

// SPEC 9, SHARDING.md B1: the timing relations of a sharded subscription, and what its keys
// need. `path` is "subscriptions[i]".
bool ValidateSharding(const Config& config, const Subscription& sub, const std::string& path,
                      const ProblemSink& problem) {
  const ShardingConfig& timing = sub.sharding;
  const std::string at = path + ".sharding.";
  if (timing.heartbeat_interval * 3 > timing.session_timeout) {
    problem(at + "heartbeat_interval",
            "must be at most a third of sharding.session_timeout (" + Show(timing.session_timeout) +
                "): " + Show(timing.heartbeat_interval) + " leaves no room for a missed heartbeat");
    return false;
  }
  if (config.redis.command_timeout * 3 > timing.session_timeout) {
    problem("redis.command_timeout", "must be at most a third of " + at + "session_timeout (" +
                                         Show(timing.session_timeout) +
                                         "): one slow command would cost the lease");
    return false;
  }
  if (sub.handler.timeout >= timing.drain_timeout) {
    problem(at + "drain_timeout", "must exceed handler.timeout (" + Show(sub.handler.timeout) +
                                      "): a revoked shard's last request must be able to finish");
    return false;
  }
  if (timing.drain_timeout + 2 * timing.heartbeat_interval >= timing.rebalance_timeout) {
    problem(at + "rebalance_timeout",
            "must exceed drain_timeout + 2 x heartbeat_interval (" +
                Show(timing.drain_timeout + 2 * timing.heartbeat_interval) +
                "): a member that drains in time must not be fenced for it");
    return false;
  }
  if (config.shutdown.drain_timeout < timing.drain_timeout) {
    problem("shutdown.drain_timeout", "must be at least " + at + "drain_timeout (" +
                                          Show(timing.drain_timeout) +
                                          "): a leaving member drains every shard it holds");
    return false;
  }
  if (!ValidateStall(sub, at, problem)) return false;
  const std::string pattern = sub.ShardKeyPattern();
  if (config.redis.mode == RedisMode::kCluster) {
    if (std::string why = ClusterKeyPatternProblem(sub); !why.empty()) {
      problem(at + "key_pattern", why);
      return false;
    }
  }
  if (!sub.dead_letter.stream_defaulted && !sub.dead_letter.stream.empty()) {
    problem(path + ".dead_letter.stream",
            "a sharded subscription writes dead letters to each shard's own stream (" +
                keys::ShardDeadLetterKey(keys::ShardKey(pattern, 0)) +
                " for shard 0), in the shard's slot; remove dead_letter.stream");
    return false;
  }
  return true;
}

// What the subscriptions before this one took: each (stream, group), name and sharded
// coordinator may be taken once.
struct Taken {
  std::set<std::pair<std::string, std::string>> stream_groups;
  std::set<std::string> names;
  std::map<std::string, std::string> coordinators;  // coordinator key -> subscription
};

bool ValidateDistinct(const Subscription& sub, const std::string& path, Taken* taken,
                      const ProblemSink& problem) {
  if (!taken->stream_groups.insert({sub.stream, sub.group}).second) {
    problem(path, "stream \"" + sub.stream + "\" with group \"" + sub.group +
                      "\" is already subscribed by an earlier subscription");
    return false;
  }
  if (!taken->names.insert(sub.name).second) {
    problem(path + ".name", "name \"" + sub.name + "\" is used by an earlier subscription");
    return false;
  }
  return true;
}

bool ValidateHandler(const Subscription& sub, const std::string& path, const ProblemSink& problem) {
  if (sub.handler.url.empty()) {
    problem(path + ".handler.url", "required (set it here or in defaults.handler.url)");
    return false;
  }
  // A batch is a json envelope of entries (SPEC 3.4) or a CloudEvents JSON batch (an array of
  // structured events); the other formats have no batch form (Dapr's bulk subscribe is not
  // offered: its answer is not Dapr's per-event one).
  if (sub.handler.batch_size > 1 && sub.handler.format != Format::kJson &&
      sub.handler.format != Format::kCloudEventsStructured) {
    problem(path + ".handler.batch_size",
            "batch delivery (batch_size > 1) needs format: json or cloudevents-structured "
            "(format is " +
                std::string(FormatName(sub.handler.format)) + ")");
    return false;
  }
  if (AsksAppForDaprRoutes(sub.handler) && UrlScheme(sub.handler.url) == "https") {
    // The question to the app at start is plain HTTP (delivery/http_get.h): the app listens on
    // the pod's loopback, as a Dapr app does for its sidecar.
    problem(path + ".handler.url",
            "format dapr without a path asks the app GET /dapr/subscribe over http:// only; "
            "use an http:// url or give the url the route's path");
    return false;
  }
  if (sub.handler.format == Format::kRaw && sub.handler.raw_field.empty()) {
    problem(path + ".handler.raw_field", "required with format: raw");
    return false;
  }
  return true;
}

// SPEC 11's handler targets: the Unix socket carries plain HTTP to every url of the handler, and
// a bearer token is the Authorization header, which handler.headers then must not set too.
bool ValidateHandlerTargets(const Subscription& sub, const std::string& path,
                            const ProblemSink& problem) {
  const HandlerConfig& handler = sub.handler;
  if (!handler.auth.bearer_token_file.empty()) {
    for (const auto& [name, value] : handler.headers) {
      if (!EqualsIgnoreCase(name, "Authorization")) continue;
      problem(path + ".handler.auth.bearer_token_file",
              "handler.headers sets " + name +
                  " too; the token file's bearer token is that header: remove one of them");
      return false;
    }
  }
  if (handler.unix_socket.empty()) return true;
  // Plain HTTP only: a handler in the same pod behind a socket in a shared emptyDir needs no TLS.
  const std::string why = "handler.unix_socket carries plain HTTP: use an http:// url";
  const std::pair<std::string, const std::string*> urls[] = {
      {".handler.url", &handler.url}, {".handler.health_url", &handler.health_url}};
  for (const auto& [key, url] : urls) {
    if (UrlScheme(*url) != "https") continue;
    problem(path + key, why + " (got \"" + *url + "\")");
    return false;
  }
  for (size_t i = 0; i < sub.routes.size(); ++i) {
    if (UrlScheme(sub.routes[i].url) != "https") continue;
    problem(path + ".routes[" + std::to_string(i) + "].url",
            why + " (got \"" + sub.routes[i].url + "\")");
    return false;
  }
  return true;
}

// What becomes of an entry after a delivery: the retry delays, the acknowledgement and the
// dead-letter stream.
bool ValidateSettling(const Config& config, const Subscription& sub, const std::string& path,
                      const ProblemSink& problem) {
  if (sub.retry.max_backoff < sub.retry.initial_backoff) {
    problem(path + ".retry.max_backoff", "must not be below retry.initial_backoff");
    return false;
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
      return false;
    }
  }
  if (sub.dead_letter.stream == sub.stream) {
    problem(path + ".dead_letter.stream", "must differ from the subscription's stream");
    return false;
  }
  return true;
}

// consumer.reap_idle against this subscription (SPEC 4.6, docs/reaping.md).
bool ValidateReaping(const Config& config, const Subscription& sub, const std::string& path,
                     const ProblemSink& problem) {
  if (sub.sharding.enabled() && config.consumer_reap_idle.count() > 0) {
    // SPEC 4.6 in sharded mode is not built: the shard streams' groups would have to be reaped
    // by each shard's owner under its fence (SHARDING.md B13). Refused rather than silently
    // reaping only the plain subscriptions (docs/reaping.md).
    problem("consumer.reap_idle",
            "consumer reaping does not apply to sharded subscriptions, and " + path + " (\"" +
                sub.name +
                "\") has a sharding block: set consumer.reap_idle: 0s, or run the sharded "
                "subscription in a process of its own");
    return false;
  }
  if (config.consumer_reap_idle.count() > 0 && sub.claim.interval * 2 > config.consumer_reap_idle) {
    // A reaping sidecar refreshes its own consumer on the claim beat (docs/reaping.md): beats
    // as far apart as reap_idle would let its peers take it for idle.
    problem(path + ".claim.interval", "must be at most half of consumer.reap_idle (" +
                                          FormatDuration(config.consumer_reap_idle) + ")");
    return false;
  }
  return true;
}

bool ValidateShardedSubscription(const Config& config, const Subscription& sub,
                                 const std::string& path, Taken* taken,
                                 const ProblemSink& problem) {
  if (!ValidateSharding(config, sub, path, problem)) return false;
  // Two sharded subscriptions must not share the coordinator's keys: ("orders:eu",
  // "billing") and ("orders", "eu:billing") would both be sc:{orders:eu:billing}.
  const std::string coordinator = keys::CoordinatorKeysFor(sub.stream, sub.group).meta;
  if (!taken->coordinators.emplace(coordinator, sub.name).second) {
    problem(path, "its coordinator keys (" + coordinator + ") are those of subscription \"" +
                      taken->coordinators[coordinator] +
                      "\": rename the stream or the group so that \"<stream>:<group>\" "
                      "differs");
    return false;
  }
  return true;
}

// The checks of one subscription, in the order their problems are reported (the first wins).
bool ValidateSubscription(const Config& config, const Subscription& sub, const std::string& path,
                          Taken* taken, const ProblemSink& problem) {
  return ValidateDistinct(sub, path, taken, problem) && ValidateHandler(sub, path, problem) &&
         ValidateHandlerTargets(sub, path, problem) &&
         ValidateSettling(config, sub, path, problem) &&
         ValidateReaping(config, sub, path, problem) &&
         (!sub.sharding.enabled() ||
          ValidateShardedSubscription(config, sub, path, taken, problem));
}

bool ValidateTls(const TlsConfig& tls, const ProblemSink& problem) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    problem(tls.cert_file.empty() ? "redis.tls.cert_file" : "redis.tls.key_file",
            "cert_file and key_file go together (mutual TLS needs both)");
    return false;
  }
  return true;
}

}  // namespace

std::string ClusterKeyPatternProblem(const Subscription& sub) {
  // The shard index must be inside the key's hash tag, or every shard lands in one slot.
  const std::string pattern = sub.ShardKeyPattern();
  if (keys::HashedPart(pattern).find("%d") != std::string_view::npos && keys::HasHashTag(pattern)) {
    return "";
  }
  return "in cluster mode %d must be inside the key's hash tag, like \"" + sub.stream +
         ":{%d}\" (got \"" + pattern + "\"): each shard needs a slot of its own";
}

void ValidateConfig(const Config& config, const ProblemSink& problem) {
  if (config.subscriptions.empty() && config.streams.empty()) {
    problem("subscriptions",
            "at least one subscription is required (or a `streams` list for the log API)");
    return;
  }
  if (!ValidateLogApi(config, problem)) return;
  Taken taken;
  for (size_t i = 0; i < config.subscriptions.size(); ++i) {
    const std::string path = "subscriptions[" + std::to_string(i) + "]";
    if (!ValidateSubscription(config, config.subscriptions[i], path, &taken, problem)) return;
  }
  if (!ValidateTls(config.redis.tls, problem)) return;
  if (!ValidateTopology(config.redis, problem)) return;
}

}  // namespace streamcar::config
