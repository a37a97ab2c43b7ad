#include "sidecar/config/config_diff.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdlib>
#include <string_view>

#include "sidecar/config/loader.h"

namespace streamcar::config {
namespace {

// Walks two trees of `check`'s output together: the effective value of every key, so that a
// default spelled out and a key left out compare equal, and every key `check` knows is compared
// without a list of them here.
void Walk(const YAML::Node& a, const YAML::Node& b, const std::string& path,
          std::vector<std::string>* out) {
  if (a.Type() != b.Type()) {
    out->push_back(path);
    return;
  }
  if (a.IsScalar()) {
    if (a.Scalar() != b.Scalar()) out->push_back(path);
    return;
  }
  if (a.IsSequence()) {
    if (a.size() != b.size()) {
      out->push_back(path);
      return;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      Walk(a[i], b[i], path + "[" + std::to_string(i) + "]", out);
    }
    return;
  }
  if (!a.IsMap()) return;
  const auto join = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  for (const auto& item : a) {
    const auto key = item.first.as<std::string>();
    Walk(item.second, b[key], join(key), out);
  }
  for (const auto& item : b) {
    const auto key = item.first.as<std::string>();
    if (!a[key]) out->push_back(join(key));
  }
}

// `check` prints these as "***" (or masks the password in the url): compared here by value.
void CompareSecrets(const Config& a, const Config& b, std::vector<std::string>* out) {
  const auto note = [out](bool differ, const std::string& path) {
    if (!differ) return;
    for (const auto& seen : *out) {
      if (seen == path) return;
    }
    out->push_back(path);
  };
  note(a.redis.url != b.redis.url, "redis.url");
  note(a.redis.password != b.redis.password, "redis.password");
  note(a.redis.sentinel.password != b.redis.sentinel.password, "redis.sentinel.password");
  note(a.archive.url != b.archive.url, "archive.url");
  if (a.subscriptions.size() != b.subscriptions.size()) return;
  for (size_t i = 0; i < a.subscriptions.size(); ++i) {
    const std::string path = "subscriptions[" + std::to_string(i) + "].handler";
    const HandlerConfig& ha = a.subscriptions[i].handler;
    const HandlerConfig& hb = b.subscriptions[i].handler;
    note(ha.auth.hmac_secret != hb.auth.hmac_secret, path + ".auth.hmac_secret");
    for (const auto& [name, value] : ha.headers) {
      const auto other = hb.headers.find(name);
      note(other != hb.headers.end() && other->second != value, path + ".headers." + name);
    }
  }
}

// The keys of a subscription that apply live: its loop is built again from them (TakeLiveKeys
// copies each), and entries still pending in Redis are delivered by the new one (at-least-once).
constexpr std::array<std::string_view, 10> kLiveSubscriptionKeys = {
    "start", "handler",  "retry", "circuit_breaker", "dead_letter",
    "claim", "ordering", "ack",   "retention",       "routes"};

ConfigChange ClassifySubscriptionKey(const Config& running, const std::string& path) {
  static constexpr std::string_view kItem = "subscriptions[";
  ConfigChange change{path, false, "the set of subscriptions changes only with a restart"};
  const size_t close = path.find(']');
  // "subscriptions" itself: a list of another length.
  if (!path.starts_with(kItem) || close == std::string::npos || close + 1 >= path.size()) {
    return change;
  }
  const size_t index = std::strtoul(path.c_str() + kItem.size(), nullptr, 10);
  if (index >= running.subscriptions.size()) return change;
  const std::string rest = path.substr(close + 2);
  const std::string key = rest.substr(0, rest.find_first_of(".["));
  const Subscription& sub = running.subscriptions[index];
  if (key == "stream" || key == "group" || key == "name") return change;
  if (sub.sharding.enabled() || key == "sharding") {
    change.why_not = "a sharded subscription changes only with a restart";
    return change;
  }
  if (AsksAppForDaprRoutes(sub.handler)) {
    change.why_not = "its routes came from the app's /dapr/subscribe at start";
    return change;
  }
  if (rest == "dead_letter.stream") {
    change.why_not = "the dead-letter stream is placed at start";
    return change;
  }
  for (std::string_view live : kLiveSubscriptionKeys) {
    if (key == live) return ConfigChange{path, true, ""};
  }
  change.why_not = "changes only with a restart";
  return change;
}

ConfigChange Classify(const Config& running, const std::string& path) {
  if (path.starts_with("subscriptions")) return ClassifySubscriptionKey(running, path);
  if (path.starts_with("shutdown")) return ConfigChange{path, true, ""};
  // Applied by setting the process's level: no subscription's loop is touched.
  if (path.starts_with("log.")) return ConfigChange{path, true, ""};
  if (path.starts_with("redis")) return ConfigChange{path, false, "the Redis connection"};
  if (path.starts_with("consumer")) return ConfigChange{path, false, "the consumer's identity"};
  return ConfigChange{path, false, "changes only with a restart"};
}

std::string Join(const std::vector<ConfigChange>& changes, bool refused_only) {
  std::string out;
  for (const auto& change : changes) {
    if (refused_only && change.live) continue;
    if (!out.empty()) out += ", ";
    out += change.path;
  }
  return out;
}

}  // namespace

std::vector<ConfigChange> DiffConfig(const Config& running, const Config& next) {
  std::vector<std::string> paths;
  Walk(YAML::Load(EmitEffectiveYaml(running)), YAML::Load(EmitEffectiveYaml(next)), "", &paths);
  CompareSecrets(running, next, &paths);
  std::vector<ConfigChange> changes;
  changes.reserve(paths.size());
  for (const auto& path : paths) changes.push_back(Classify(running, path));
  return changes;
}

void TakeLiveKeys(const Subscription& next, Subscription* running) {
  running->start = next.start;
  const std::string dapr_topic = running->handler.dapr_topic;
  running->handler = next.handler;
  running->handler.dapr_topic = dapr_topic;
  running->retry = next.retry;
  running->circuit_breaker = next.circuit_breaker;
  running->dead_letter.max_len = next.dead_letter.max_len;  // its stream is refused
  running->claim = next.claim;
  running->ordering = next.ordering;
  running->ack = next.ack;
  running->retention = next.retention;
  running->routes = next.routes;
}

std::string RefusedKeys(const std::vector<ConfigChange>& changes) { return Join(changes, true); }
std::string ChangedKeys(const std::vector<ConfigChange>& changes) { return Join(changes, false); }

}  // namespace streamcar::config
