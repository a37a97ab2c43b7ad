#include "sidecar/config/loader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "sidecar/common/duration.h"
#include "sidecar/common/size.h"
#include "sidecar/common/text.h"
#include "sidecar/config/redis_url.h"
#include "sidecar/config/validate.h"

namespace streamcar::config {
namespace {

// Thrown inside the decoder only; turned into a Status at the boundary.
struct ConfigProblem {
  std::string message;
};

const std::vector<std::string_view> kTopKeys = {"version",  "redis",    "consumer",      "admin",
                                                "shutdown", "defaults", "subscriptions", "api",
                                                "streams",  "archive"};
const std::vector<std::string_view> kRedisKeys = {
    "url", "username", "password", "connect_timeout", "command_timeout", "tls"};
const std::vector<std::string_view> kTlsKeys = {"ca_file", "cert_file", "key_file", "server_name",
                                                "verify"};
const std::vector<std::string_view> kIdentityKeys = {"stream", "group", "start", "name"};
const std::vector<std::string_view> kBodyKeys = {"handler",  "retry", "dead_letter", "claim",
                                                 "ordering", "ack",   "retention"};
const std::vector<std::string_view> kHandlerKeys = {
    "url",    "timeout",   "concurrency", "batch_size", "max_held_bytes",
    "format", "raw_field", "headers",     "health_url", "reject_statuses"};
const std::vector<std::string_view> kRetryKeys = {"max_attempts", "initial_backoff", "max_backoff",
                                                  "multiplier", "jitter"};
const std::vector<std::string_view> kRetentionKeys = {"max_len", "max_age", "interval"};
// SPEC section 10: the log API, the streams it serves and the archive below the watermark.
const std::vector<std::string_view> kApiKeys = {"listen", "token_file", "max_body",
                                                "idempotency_ttl"};
const std::vector<std::string_view> kStreamKeys = {"name",   "produce",   "max_len",
                                                   "notify", "retention", "archive"};
const std::vector<std::string_view> kArchiveKeys = {"url", "interval", "batch"};
// The largest max_len a stream or retention accepts (as for dead_letter.max_len).
constexpr int64_t kMaxLen = int64_t{1} << 40;

class Decoder {
 public:
  Decoder(std::string file, const EnvLookup& env) : file_(std::move(file)), env_(env) {}

  Config Decode(const YAML::Node& root) {
    Config config;
    config.source_file = file_;
    if (!root || root.IsNull()) Fail(root, "", "the file is empty (see SPEC section 2)");
    RequireMap(root, "(top level)");
    CheckKeys(root, "", kTopKeys);
    if (root["version"]) {
      config.version = static_cast<int>(Int(root["version"], "version", 1, 1));
    }
    if (auto redis = root["redis"]) DecodeRedis(redis, &config.redis);
    if (auto consumer = root["consumer"]) {
      RequireMap(consumer, "consumer");
      CheckKeys(consumer, "consumer", {"name"});
      if (consumer["name"]) config.consumer_name = Text(consumer["name"], "consumer.name");
    }
    if (auto admin = root["admin"]) {
      RequireMap(admin, "admin");
      CheckKeys(admin, "admin", {"listen"});
      if (admin["listen"]) {
        config.admin.listen = Text(admin["listen"], "admin.listen");
        CheckListen(admin["listen"], "admin.listen", config.admin.listen);
      }
    }
    if (auto shutdown = root["shutdown"]) {
      RequireMap(shutdown, "shutdown");
      CheckKeys(shutdown, "shutdown", {"drain_timeout"});
      if (shutdown["drain_timeout"]) {
        config.shutdown.drain_timeout =
            Duration(shutdown["drain_timeout"], "shutdown.drain_timeout", /*allow_zero=*/true);
      }
    }
    Subscription defaults;
    if (auto node = root["defaults"]) {
      RequireMap(node, "defaults");
      for (auto it : node) {
        const auto key = it.first.as<std::string>();
        for (auto identity : kIdentityKeys) {
          if (key == identity) {
            Fail(it.first, "defaults." + key,
                 "not allowed in defaults (set it in each subscription)");
          }
        }
      }
      CheckKeys(node, "defaults", kBodyKeys);
      DecodeBody(node, "defaults", &defaults);
    }
    if (auto api = root["api"]) DecodeApi(api, &config.api);
    if (auto streams = root["streams"]) DecodeStreams(streams, &config.streams);
    if (auto archive = root["archive"]) DecodeArchive(archive, &config.archive);
    // A sidecar that only serves the log API (SPEC 10) has `streams` and no subscriptions.
    auto subscriptions = root["subscriptions"];
    const bool serves_streams = !config.streams.empty();
    if ((!subscriptions || subscriptions.IsNull()) && !serves_streams) {
      Fail(root, "subscriptions",
           "required: a list with at least one subscription (or a `streams` list, SPEC 10)");
    }
    if (subscriptions && !subscriptions.IsNull() && !subscriptions.IsSequence()) {
      Fail(subscriptions, "subscriptions", "must be a list of subscriptions");
    }
    for (size_t i = 0; subscriptions && i < subscriptions.size(); ++i) {
      const std::string path = "subscriptions[" + std::to_string(i) + "]";
      config.subscriptions.push_back(DecodeSubscription(subscriptions[i], path, defaults));
      subscription_lines_.push_back(Line(subscriptions[i]));
    }
    if (config.consumer_name.empty()) config.consumer_name = HostName();
    ValidateConfig(config, [&](const std::string& path, const std::string& message) {
      throw ConfigProblem{Locate(LineForPath(path, root), path, message)};
    });
    return config;
  }

 private:
  [[noreturn]] void Fail(const YAML::Node& node, const std::string& path,
                         const std::string& message) {
    throw ConfigProblem{Locate(Line(node), path, message)};
  }

  std::string Locate(int line, const std::string& path, const std::string& message) const {
    std::string out = file_;
    if (line > 0) out += ":" + std::to_string(line);
    out += ": ";
    if (!path.empty()) out += path + ": ";
    return out + message;
  }

  static int Line(const YAML::Node& node) {
    if (!node || !node.IsDefined()) return 0;
    const auto mark = node.Mark();
    return mark.line >= 0 ? mark.line + 1 : 0;
  }

  // Cross-key rules name a path; give them the line of the subscription they are in.
  int LineForPath(const std::string& path, const YAML::Node& root) const {
    if (path.starts_with("subscriptions[")) {
      size_t index = std::strtoul(path.c_str() + 14, nullptr, 10);
      if (index < subscription_lines_.size()) return subscription_lines_[index];
    }
    if (path.starts_with("streams[")) {
      size_t index = std::strtoul(path.c_str() + 8, nullptr, 10);
      if (index < stream_lines_.size()) return stream_lines_[index];
    }
    for (const char* section : {"redis", "api", "archive"}) {
      if (path.starts_with(section) && root[section]) return Line(root[section]);
    }
    return 0;
  }

  void RequireMap(const YAML::Node& node, const std::string& path) {
    if (!node.IsMap()) Fail(node, path, "must be a mapping of keys to values");
  }

  void CheckKeys(const YAML::Node& node, const std::string& path,
                 const std::vector<std::string_view>& allowed) {
    std::vector<std::string> seen;
    for (auto it : node) {
      if (!it.first.IsScalar()) Fail(it.first, path, "keys must be plain names");
      const auto key = it.first.as<std::string>();
      // yaml-cpp keeps the first of two equal keys silently; a second one is a mistake to report.
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        Fail(it.first, path.empty() ? key : path + "." + key, "duplicate key");
      }
      seen.push_back(key);
      bool known = false;
      for (auto candidate : allowed) known = known || candidate == key;
      if (known) continue;
      std::string message = "unknown key";
      if (auto meant = ClosestMatch(key, allowed)) message += " (did you mean " + *meant + "?)";
      Fail(it.first, path.empty() ? key : path + "." + key, message);
    }
  }

  // A scalar with ${VAR} expanded. A null value (key with nothing after it) reads as "".
  std::string Text(const YAML::Node& node, const std::string& path) {
    if (node.IsNull()) return {};
    if (!node.IsScalar()) Fail(node, path, "must be a single value, not a list or mapping");
    std::string error;
    auto expanded = ExpandVariables(node.Scalar(), env_, &error);
    if (!expanded) Fail(node, path, error);
    return *expanded;
  }

  int64_t Int(const YAML::Node& node, const std::string& path, int64_t min, int64_t max) {
    const std::string text = Text(node, path);
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      Fail(node, path, "must be a whole number (got \"" + text + "\")");
    }
    if (value < min || value > max) {
      Fail(node, path,
           "must be between " + std::to_string(min) + " and " + std::to_string(max) + " (got " +
               text + ")");
    }
    return value;
  }

  double Real(const YAML::Node& node, const std::string& path, double min, double max,
              bool max_inclusive) {
    const std::string text = Text(node, path);
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || std::isspace(text[0])) {
      Fail(node, path, "must be a number (got \"" + text + "\")");
    }
    if (value < min || value > max || (!max_inclusive && value == max)) {
      std::ostringstream range;
      range << "must be at least " << min << " and " << (max_inclusive ? "at most " : "below ")
            << max << " (got " << text << ")";
      Fail(node, path, range.str());
    }
    return value;
  }

  bool Bool(const YAML::Node& node, const std::string& path) {
    std::string text = Text(node, path);
    for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (text == "true" || text == "yes" || text == "on") return true;
    if (text == "false" || text == "no" || text == "off") return false;
    Fail(node, path, "must be true or false (got \"" + text + "\")");
  }

  Millis Duration(const YAML::Node& node, const std::string& path, bool allow_zero) {
    const std::string text = Text(node, path);
    std::string error;
    auto value = ParseDuration(text, &error);
    if (!value) Fail(node, path, error);
    if (!allow_zero && value->count() == 0) Fail(node, path, "must be greater than 0s");
    return *value;
  }

  uint64_t Size(const YAML::Node& node, const std::string& path) {
    const std::string text = Text(node, path);
    std::string error;
    auto value = ParseSize(text, &error);
    if (!value) Fail(node, path, error);
    if (*value == 0) Fail(node, path, "must be greater than 0B");
    return *value;
  }

  void CheckListen(const YAML::Node& node, const std::string& path, const std::string& listen) {
    if (listen.empty()) return;
    auto colon = listen.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      Fail(node, path, "must be host:port, e.g. 127.0.0.1:9465 or [::1]:9465 (or \"\" for off)");
    }
    int port = 0;
    auto port_text = std::string_view(listen).substr(colon + 1);
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 ||
        port > 65535) {
      Fail(node, path, "port must be 1..65535 (got \"" + std::string(port_text) + "\")");
    }
  }

  void DecodeRedis(const YAML::Node& node, RedisConfig* redis) {
    RequireMap(node, "redis");
    CheckKeys(node, "redis", kRedisKeys);
    if (node["url"]) {
      redis->url = Text(node["url"], "redis.url");
      std::string error;
      if (!ParseRedisUrl(redis->url, &error)) Fail(node["url"], "redis.url", error);
    }
    if (node["username"]) redis->username = Text(node["username"], "redis.username");
    if (node["password"]) redis->password = Text(node["password"], "redis.password");
    if (node["connect_timeout"]) {
      redis->connect_timeout = Duration(node["connect_timeout"], "redis.connect_timeout", false);
    }
    if (node["command_timeout"]) {
      redis->command_timeout = Duration(node["command_timeout"], "redis.command_timeout", false);
    }
    if (auto tls = node["tls"]) {
      RequireMap(tls, "redis.tls");
      CheckKeys(tls, "redis.tls", kTlsKeys);
      if (tls["ca_file"]) redis->tls.ca_file = Text(tls["ca_file"], "redis.tls.ca_file");
      if (tls["cert_file"]) redis->tls.cert_file = Text(tls["cert_file"], "redis.tls.cert_file");
      if (tls["key_file"]) redis->tls.key_file = Text(tls["key_file"], "redis.tls.key_file");
      if (tls["server_name"]) {
        redis->tls.server_name = Text(tls["server_name"], "redis.tls.server_name");
      }
      if (tls["verify"]) redis->tls.verify = Bool(tls["verify"], "redis.tls.verify");
    }
  }

  Subscription DecodeSubscription(const YAML::Node& node, const std::string& path,
                                  const Subscription& defaults) {
    RequireMap(node, path);
    std::vector<std::string_view> allowed = kIdentityKeys;
    allowed.insert(allowed.end(), kBodyKeys.begin(), kBodyKeys.end());
    CheckKeys(node, path, allowed);
    Subscription sub = defaults;
    sub.stream = RequiredText(node, path, "stream");
    sub.group = RequiredText(node, path, "group");
    if (!node["start"] || node["start"].IsNull()) {
      Fail(node, path + ".start",
           "required: where a new group starts (new, beginning or an entry id)");
    }
    sub.start = Text(node["start"], path + ".start");
    if (sub.start != "new" && sub.start != "beginning" && !ParseEntryId(sub.start)) {
      Fail(
          node["start"], path + ".start",
          "must be new, beginning or an entry id like 1700000000000-0 (got \"" + sub.start + "\")");
    }
    if (node["name"]) sub.name = Text(node["name"], path + ".name");
    if (sub.name.empty()) sub.name = sub.stream + "/" + sub.group;
    DecodeBody(node, path, &sub);
    if (sub.dead_letter.stream.empty()) sub.dead_letter.stream = sub.stream + ":dlq";
    return sub;
  }

  std::string RequiredText(const YAML::Node& node, const std::string& path, const char* key) {
    if (!node[key] || node[key].IsNull()) Fail(node, path + "." + key, "required");
    std::string value = Text(node[key], path + "." + key);
    if (value.empty()) Fail(node[key], path + "." + key, "must not be empty");
    return value;
  }

  // The keys a subscription and `defaults` share; only the keys present overwrite `sub`.
  void DecodeBody(const YAML::Node& node, const std::string& path, Subscription* sub) {
    if (auto handler = node["handler"]) DecodeHandler(handler, path + ".handler", &sub->handler);
    if (auto retry = node["retry"]) {
      const std::string p = path + ".retry";
      RequireMap(retry, p);
      CheckKeys(retry, p, kRetryKeys);
      auto& r = sub->retry;
      if (retry["max_attempts"]) {
        r.max_attempts =
            static_cast<int>(Int(retry["max_attempts"], p + ".max_attempts", 0, 1'000'000));
      }
      if (retry["initial_backoff"]) {
        r.initial_backoff = Duration(retry["initial_backoff"], p + ".initial_backoff", false);
      }
      if (retry["max_backoff"])
        r.max_backoff = Duration(retry["max_backoff"], p + ".max_backoff", false);
      if (retry["multiplier"])
        r.multiplier = Real(retry["multiplier"], p + ".multiplier", 1.0, 100.0, true);
      if (retry["jitter"]) r.jitter = Real(retry["jitter"], p + ".jitter", 0.0, 1.0, false);
    }
    if (auto dead_letter = node["dead_letter"]) {
      const std::string p = path + ".dead_letter";
      RequireMap(dead_letter, p);
      CheckKeys(dead_letter, p, {"stream", "max_len"});
      if (dead_letter["stream"])
        sub->dead_letter.stream = Text(dead_letter["stream"], p + ".stream");
      if (dead_letter["max_len"]) {
        sub->dead_letter.max_len = Int(dead_letter["max_len"], p + ".max_len", 0, int64_t{1} << 40);
      }
    }
    if (auto claim = node["claim"]) {
      const std::string p = path + ".claim";
      RequireMap(claim, p);
      CheckKeys(claim, p, {"min_idle", "interval", "count"});
      if (claim["min_idle"]) {
        sub->claim.min_idle = Duration(claim["min_idle"], p + ".min_idle", false);
        if (sub->claim.min_idle < Millis(100)) {
          Fail(claim["min_idle"], p + ".min_idle",
               "must be at least 100ms (leases are renewed every min_idle/3)");
        }
      }
      if (claim["interval"])
        sub->claim.interval = Duration(claim["interval"], p + ".interval", false);
      if (claim["count"])
        sub->claim.count = static_cast<int>(Int(claim["count"], p + ".count", 1, 10000));
    }
    if (auto ordering = node["ordering"]) {
      const std::string p = path + ".ordering";
      RequireMap(ordering, p);
      CheckKeys(ordering, p, {"key_field"});
      if (ordering["key_field"])
        sub->ordering.key_field = Text(ordering["key_field"], p + ".key_field");
    }
    if (auto ack = node["ack"]) {
      const std::string p = path + ".ack";
      RequireMap(ack, p);
      CheckKeys(ack, p, {"delete"});
      if (ack["delete"]) sub->ack.delete_entries = Bool(ack["delete"], p + ".delete");
    }
    if (auto retention = node["retention"]) {
      DecodeRetention(retention, path + ".retention", &sub->retention);
    }
  }

  // `retention` of a subscription (4.4) and of a log API stream (10): the same keys and rules.
  void DecodeRetention(const YAML::Node& node, const std::string& p, RetentionConfig* retention) {
    RequireMap(node, p);
    CheckKeys(node, p, kRetentionKeys);
    if (node["max_len"]) retention->max_len = Int(node["max_len"], p + ".max_len", 0, kMaxLen);
    if (node["max_age"]) retention->max_age = Duration(node["max_age"], p + ".max_age", true);
    if (node["interval"]) {
      retention->interval = Duration(node["interval"], p + ".interval", false);
    }
  }

  void DecodeApi(const YAML::Node& node, ApiConfig* api) {
    RequireMap(node, "api");
    CheckKeys(node, "api", kApiKeys);
    if (node["listen"]) {
      api->listen = Text(node["listen"], "api.listen");
      CheckListen(node["listen"], "api.listen", api->listen);
    }
    if (node["token_file"]) api->token_file = Text(node["token_file"], "api.token_file");
    if (node["max_body"]) api->max_body = Size(node["max_body"], "api.max_body");
    if (node["idempotency_ttl"]) {
      api->idempotency_ttl = Duration(node["idempotency_ttl"], "api.idempotency_ttl", false);
    }
  }

  void DecodeStreams(const YAML::Node& node, std::vector<LogStream>* streams) {
    if (node.IsNull()) return;
    if (!node.IsSequence()) Fail(node, "streams", "must be a list of streams");
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string p = "streams[" + std::to_string(i) + "]";
      const YAML::Node item = node[i];
      RequireMap(item, p);
      CheckKeys(item, p, kStreamKeys);
      LogStream stream;
      stream.name = RequiredText(item, p, "name");
      if (item["produce"]) stream.produce = Bool(item["produce"], p + ".produce");
      if (item["max_len"]) stream.max_len = Int(item["max_len"], p + ".max_len", 0, kMaxLen);
      if (item["notify"]) stream.notify = Bool(item["notify"], p + ".notify");
      if (auto retention = item["retention"]) {
        DecodeRetention(retention, p + ".retention", &stream.retention);
      }
      if (item["archive"]) stream.archive = Bool(item["archive"], p + ".archive");
      streams->push_back(std::move(stream));
      stream_lines_.push_back(Line(item));
    }
  }

  void DecodeArchive(const YAML::Node& node, ArchiveConfig* archive) {
    RequireMap(node, "archive");
    CheckKeys(node, "archive", kArchiveKeys);
    if (node["url"]) {
      archive->url = Text(node["url"], "archive.url");
      if (auto why = CheckArchiveUrl(archive->url); !why.empty()) {
        Fail(node["url"], "archive.url", why);
      }
    }
    if (node["interval"]) archive->interval = Duration(node["interval"], "archive.interval", false);
    if (node["batch"]) {
      archive->batch = static_cast<int>(Int(node["batch"], "archive.batch", 1, 100000));
    }
  }

  void DecodeHandler(const YAML::Node& node, const std::string& p, HandlerConfig* h) {
    RequireMap(node, p);
    CheckKeys(node, p, kHandlerKeys);
    if (node["url"]) {
      h->url = Text(node["url"], p + ".url");
      if (auto why = CheckHttpUrl(h->url); !why.empty()) Fail(node["url"], p + ".url", why);
    }
    if (node["timeout"]) h->timeout = Duration(node["timeout"], p + ".timeout", false);
    if (node["concurrency"])
      h->concurrency = static_cast<int>(Int(node["concurrency"], p + ".concurrency", 1, 1024));
    if (node["batch_size"])
      h->batch_size = static_cast<int>(Int(node["batch_size"], p + ".batch_size", 1, 1000));
    if (node["max_held_bytes"])
      h->max_held_bytes = Size(node["max_held_bytes"], p + ".max_held_bytes");
    if (node["format"]) {
      const std::string format = Text(node["format"], p + ".format");
      if (format == "json") {
        h->format = Format::kJson;
      } else if (format == "raw") {
        h->format = Format::kRaw;
      } else if (format == "cloudevents") {
        h->format = Format::kCloudEvents;
      } else {
        std::string message = "must be json, raw or cloudevents (got \"" + format + "\")";
        if (auto meant = ClosestMatch(format, {"json", "raw", "cloudevents"})) {
          message += "; did you mean " + *meant + "?";
        }
        Fail(node["format"], p + ".format", message);
      }
    }
    if (node["raw_field"]) h->raw_field = Text(node["raw_field"], p + ".raw_field");
    if (auto headers = node["headers"]) {
      if (!headers.IsNull()) {
        RequireMap(headers, p + ".headers");
        for (auto it : headers) {
          const auto name = it.first.as<std::string>();
          const std::string path = p + ".headers." + name;
          CheckHeaderName(it.first, path, name);
          const std::string value = Text(it.second, path);
          if (value.find_first_of("\r\n") != std::string::npos) {
            Fail(it.second, path, "header values must not contain line breaks");
          }
          h->headers[name] = value;
        }
      }
    }
    if (node["health_url"]) {
      h->health_url = Text(node["health_url"], p + ".health_url");
      if (!h->health_url.empty()) {
        if (auto why = CheckHttpUrl(h->health_url); !why.empty()) {
          Fail(node["health_url"], p + ".health_url", why);
        }
      }
    }
    if (auto statuses = node["reject_statuses"]) {
      h->reject_statuses.clear();
      if (!statuses.IsNull()) {
        if (!statuses.IsSequence())
          Fail(statuses, p + ".reject_statuses", "must be a list of HTTP statuses");
        for (size_t i = 0; i < statuses.size(); ++i) {
          const std::string path = p + ".reject_statuses[" + std::to_string(i) + "]";
          const auto status = static_cast<int>(Int(statuses[i], path, 100, 599));
          if (status < 300) {
            Fail(statuses[i], path, "must be 300..599: a 1xx or 2xx answer cannot be a rejection");
          }
          h->reject_statuses.push_back(status);
        }
      }
    }
  }

  void CheckHeaderName(const YAML::Node& node, const std::string& path, const std::string& name) {
    static constexpr std::string_view kTokenChars = "!#$%&'*+-.^_`|~";
    bool valid = !name.empty();
    for (char c : name) {
      valid = valid && (std::isalnum(static_cast<unsigned char>(c)) ||
                        kTokenChars.find(c) != std::string_view::npos);
    }
    if (!valid) Fail(node, path, "not a valid HTTP header name");
    std::string lower = name;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.starts_with("streamcar-") || lower == "idempotency-key" ||
        lower == "content-length" || lower == "content-type" || lower == "host" ||
        lower.starts_with("ce-")) {
      Fail(node, path, "streamcar sets this header itself; it cannot be overridden");
    }
  }

  std::string file_;
  const EnvLookup& env_;
  std::vector<int> subscription_lines_;
  std::vector<int> stream_lines_;
};

// Shortest text that reads back as the same double ("0.2", not "0.20000000000000001").
std::string ShortDouble(double value) {
  char buffer[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

void EmitDuration(YAML::Emitter& out, const char* key, Millis value) {
  out << YAML::Key << key << YAML::Value << FormatDuration(value);
}

void EmitRetention(YAML::Emitter& out, const RetentionConfig& retention) {
  out << YAML::Key << "retention" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "max_len" << YAML::Value << retention.max_len;
  EmitDuration(out, "max_age", retention.max_age);
  EmitDuration(out, "interval", retention.interval);
  out << YAML::EndMap;
}

void EmitSubscription(YAML::Emitter& out, const Subscription& sub) {
  out << YAML::BeginMap;
  out << YAML::Key << "stream" << YAML::Value << sub.stream;
  out << YAML::Key << "group" << YAML::Value << sub.group;
  out << YAML::Key << "start" << YAML::Value << sub.start;
  out << YAML::Key << "name" << YAML::Value << sub.name;

  const auto& h = sub.handler;
  out << YAML::Key << "handler" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "url" << YAML::Value << h.url;
  EmitDuration(out, "timeout", h.timeout);
  out << YAML::Key << "concurrency" << YAML::Value << h.concurrency;
  out << YAML::Key << "batch_size" << YAML::Value << h.batch_size;
  out << YAML::Key << "max_held_bytes" << YAML::Value << FormatSize(h.max_held_bytes);
  out << YAML::Key << "format" << YAML::Value << FormatName(h.format);
  out << YAML::Key << "raw_field" << YAML::Value << h.raw_field;
  out << YAML::Key << "headers" << YAML::Value;
  if (h.headers.empty()) out << YAML::Flow;
  out << YAML::BeginMap;
  for (const auto& [name, value] : h.headers) {
    out << YAML::Key << name << YAML::Value << (IsSensitiveHeader(name) ? "***" : value);
  }
  out << YAML::EndMap;
  out << YAML::Key << "health_url" << YAML::Value << h.health_url;
  out << YAML::Key << "reject_statuses" << YAML::Value << YAML::Flow << h.reject_statuses;
  out << YAML::EndMap;

  const auto& r = sub.retry;
  out << YAML::Key << "retry" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "max_attempts" << YAML::Value << r.max_attempts;
  EmitDuration(out, "initial_backoff", r.initial_backoff);
  EmitDuration(out, "max_backoff", r.max_backoff);
  out << YAML::Key << "multiplier" << YAML::Value << ShortDouble(r.multiplier);
  out << YAML::Key << "jitter" << YAML::Value << ShortDouble(r.jitter);
  out << YAML::EndMap;

  out << YAML::Key << "dead_letter" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "stream" << YAML::Value << sub.dead_letter.stream;
  out << YAML::Key << "max_len" << YAML::Value << sub.dead_letter.max_len;
  out << YAML::EndMap;

  out << YAML::Key << "claim" << YAML::Value << YAML::BeginMap;
  EmitDuration(out, "min_idle", sub.claim.min_idle);
  EmitDuration(out, "interval", sub.claim.interval);
  out << YAML::Key << "count" << YAML::Value << sub.claim.count;
  out << YAML::EndMap;

  out << YAML::Key << "ordering" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "key_field" << YAML::Value << sub.ordering.key_field;
  out << YAML::EndMap;

  out << YAML::Key << "ack" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "delete" << YAML::Value << sub.ack.delete_entries;
  out << YAML::EndMap;

  EmitRetention(out, sub.retention);

  out << YAML::EndMap;
}

// SPEC section 10. The token file is printed by path; its content never is.
void EmitLogApi(YAML::Emitter& out, const Config& config) {
  const auto& api = config.api;
  out << YAML::Key << "api" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "listen" << YAML::Value << api.listen;
  out << YAML::Key << "token_file" << YAML::Value << api.token_file;
  out << YAML::Key << "max_body" << YAML::Value << FormatSize(api.max_body);
  EmitDuration(out, "idempotency_ttl", api.idempotency_ttl);
  out << YAML::EndMap;

  out << YAML::Key << "streams" << YAML::Value;
  if (config.streams.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const auto& stream : config.streams) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << stream.name;
    out << YAML::Key << "produce" << YAML::Value << stream.produce;
    out << YAML::Key << "max_len" << YAML::Value << stream.max_len;
    out << YAML::Key << "notify" << YAML::Value << stream.notify;
    EmitRetention(out, stream.retention);
    out << YAML::Key << "archive" << YAML::Value << stream.archive;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  out << YAML::Key << "archive" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "url" << YAML::Value << MaskUrlPassword(config.archive.url);
  EmitDuration(out, "interval", config.archive.interval);
  out << YAML::Key << "batch" << YAML::Value << config.archive.batch;
  out << YAML::EndMap;
}

}  // namespace

StatusOr<Config> LoadConfigText(std::string_view yaml, const std::string& source_name,
                                const EnvLookup& env) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return Decoder(source_name, env).Decode(root);
  } catch (const ConfigProblem& problem) {
    return Status(StatusCode::kInvalid, PrintableOneLine(problem.message));
  } catch (const YAML::Exception& e) {
    std::string message = source_name;
    if (e.mark.line >= 0) {
      message += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    }
    return Status(StatusCode::kInvalid, PrintableOneLine(message + ": invalid YAML: " + e.msg));
  }
}

StatusOr<Config> LoadConfigFile(const std::string& path, const EnvLookup& env) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status(StatusCode::kInvalid,
                  path + ": cannot read the configuration file: " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return LoadConfigText(text.str(), path, env);
}

std::string EmitEffectiveYaml(const Config& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "version" << YAML::Value << config.version;

  const auto& redis = config.redis;
  out << YAML::Key << "redis" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "url" << YAML::Value << MaskUrlPassword(redis.url);
  out << YAML::Key << "username" << YAML::Value << redis.username;
  out << YAML::Key << "password" << YAML::Value << (redis.password.empty() ? "" : "***");
  EmitDuration(out, "connect_timeout", redis.connect_timeout);
  EmitDuration(out, "command_timeout", redis.command_timeout);
  out << YAML::Key << "tls" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "ca_file" << YAML::Value << redis.tls.ca_file;
  out << YAML::Key << "cert_file" << YAML::Value << redis.tls.cert_file;
  out << YAML::Key << "key_file" << YAML::Value << redis.tls.key_file;
  out << YAML::Key << "server_name" << YAML::Value << redis.tls.server_name;
  out << YAML::Key << "verify" << YAML::Value << redis.tls.verify;
  out << YAML::EndMap << YAML::EndMap;

  out << YAML::Key << "consumer" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << config.consumer_name;
  out << YAML::EndMap;
  out << YAML::Key << "admin" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "listen" << YAML::Value << config.admin.listen;
  out << YAML::EndMap;
  out << YAML::Key << "shutdown" << YAML::Value << YAML::BeginMap;
  EmitDuration(out, "drain_timeout", config.shutdown.drain_timeout);
  out << YAML::EndMap;

  out << YAML::Key << "subscriptions" << YAML::Value;
  if (config.subscriptions.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const auto& sub : config.subscriptions) EmitSubscription(out, sub);
  out << YAML::EndSeq;
  EmitLogApi(out, config);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace streamcar::config
