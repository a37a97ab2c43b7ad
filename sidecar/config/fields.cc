#include "sidecar/config/fields.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "sidecar/common/log.h"
#include "sidecar/common/text.h"
#include "sidecar/config/route_fields.h"
#include "sidecar/config/url_rules.h"
#include "sidecar/keys/node_address.h"
#include "sidecar/keys/sharding_keys.h"

namespace streamcar::config {

namespace fields_internal {

// Shortest text that reads back as the same double ("0.2", not "0.20000000000000001").
std::string ShortDouble(double value) {
  char buffer[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

// "must be json, raw or cloudevents (got \"jsn\"); did you mean json?"
std::string EnumMessage(std::string_view got, const std::vector<std::string_view>& names) {
  std::string message = "must be ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) message += i + 1 == names.size() ? " or " : ", ";
    message += names[i];
  }
  message += " (got \"" + std::string(got) + "\")";
  if (auto meant = ClosestMatch(got, names)) message += "; did you mean " + *meant + "?";
  return message;
}

}  // namespace fields_internal

namespace {

// --- the rules of single values that are not a range ---------------------------------------------

// "" (off) or host:port.
std::string CheckListen(const std::string& listen) {
  if (listen.empty()) return {};
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return "must be host:port, e.g. 127.0.0.1:9465 or [::1]:9465 (or \"\" for off)";
  }
  int port = 0;
  auto port_text = std::string_view(listen).substr(colon + 1);
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535) {
    return "port must be 1..65535 (got \"" + std::string(port_text) + "\")";
  }
  return {};
}

std::string CheckOptionalHttpUrl(const std::string& url) {
  return url.empty() ? std::string() : CheckHttpUrl(url);
}

// The largest max_len a stream, a dead-letter stream or retention accepts.
constexpr int64_t kMaxLen = int64_t{1} << 40;

// --- custom keys --------------------------------------------------------------------------------

// redis.url: parsed once, here; the connection and every command use `endpoint`.
void ReadRedisUrl(Reader& in, const Field<RedisConfig>&, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, RedisConfig* out) {
  out->url = in.Text(value, path);
  std::string error;
  auto endpoint = ParseRedisUrl(out->url, &error);
  if (!endpoint) in.Fail(value, path, error);
  out->endpoint = *endpoint;
}

void WriteRedisUrl(Writer& out, const Field<RedisConfig>& field, const RedisConfig& redis) {
  out << YAML::Key << std::string(field.key) << YAML::Value << MaskUrlPassword(redis.url);
}

// redis.nodes, redis.sentinel.addresses: a list of "host:port" ("[::1]:26379"), each parsed as
// the topology will (keys::ParseNodeAddress), none twice; null is an empty list. Kept as written.
template <auto M>
void ReadAddresses(Reader& in, const Field<fields_internal::ClassOf<M>>&, const YAML::Node&,
                   const YAML::Node& value, const std::string& path,
                   fields_internal::ClassOf<M>* out) {
  auto& addresses = out->*M;
  addresses.clear();
  if (value.IsNull()) return;
  if (!value.IsSequence()) {
    in.Fail(value, path, "must be a list of host:port addresses, e.g. [\"10.0.0.6:6379\"]");
  }
  std::vector<keys::NodeAddress> parsed;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const std::string text = in.Text(value[i], item_path);
    std::string error;
    auto address = keys::ParseNodeAddress(text, &error);
    if (!address) in.Fail(value[i], item_path, "\"" + text + "\": " + error);
    for (size_t j = 0; j < parsed.size(); ++j) {
      if (parsed[j] == *address) {
        in.Fail(value[i], item_path,
                address->Describe() + " is listed twice (also " + path + "[" + std::to_string(j) +
                    "])");
      }
    }
    parsed.push_back(*address);
    addresses.push_back(text);
  }
}

template <auto M>
void WriteAddresses(Writer& out, const Field<fields_internal::ClassOf<M>>& field,
                    const fields_internal::ClassOf<M>& value) {
  out << YAML::Key << std::string(field.key) << YAML::Value << YAML::Flow << value.*M;
}

// api.allowed_origins: a list of origins as a browser sends them ("https://app.example.com"),
// compared exactly; null is an empty list. No wildcard: "*" would be an origin no browser sends.
void ReadOrigins(Reader& in, const Field<ApiConfig>&, const YAML::Node&, const YAML::Node& value,
                 const std::string& path, ApiConfig* out) {
  out->allowed_origins.clear();
  if (value.IsNull()) return;
  if (!value.IsSequence()) {
    in.Fail(value, path, "must be a list of origins, e.g. [\"https://app.example.com\"]");
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const std::string origin = in.Text(value[i], item_path);
    if (origin.empty()) in.Fail(value[i], item_path, "an origin is not empty");
    out->allowed_origins.push_back(origin);
  }
}

void WriteOrigins(Writer& out, const Field<ApiConfig>& field, const ApiConfig& api) {
  out << YAML::Key << std::string(field.key) << YAML::Value << YAML::Flow << api.allowed_origins;
}

// api.max_follow_buffer: a size, at least kMinFollowBuffer (below it every follower would sit at
// its least share).
constexpr uint64_t kMinFollowBuffer = uint64_t{1} << 20;

void ReadFollowBuffer(Reader& in, const Field<ApiConfig>&, const YAML::Node&,
                      const YAML::Node& value, const std::string& path, ApiConfig* out) {
  out->max_follow_buffer = in.Size(value, path);
  if (out->max_follow_buffer < kMinFollowBuffer) in.Fail(value, path, "must be at least 1MiB");
}

void WriteFollowBuffer(Writer& out, const Field<ApiConfig>& field, const ApiConfig& api) {
  out << YAML::Key << std::string(field.key) << YAML::Value << FormatSize(api.max_follow_buffer);
}

// dead_letter.stream, with the name a cluster would give it when `mode: auto` leaves that open.
void WriteDeadLetterStream(Writer& out, const Field<DeadLetterConfig>& field,
                           const DeadLetterConfig& dead_letter) {
  out << YAML::Key << std::string(field.key) << YAML::Value << dead_letter.stream;
  if (!dead_letter.stream_if_cluster.empty()) {
    out << YAML::Comment(dead_letter.stream_if_cluster + " if the server is a cluster");
  }
}

void CheckHeaderName(const Reader& in, const YAML::Node& node, const std::string& path,
                     const std::string& name) {
  static constexpr std::string_view kTokenChars = "!#$%&'*+-.^_`|~";
  bool valid = !name.empty();
  for (char c : name) {
    valid = valid && (std::isalnum(static_cast<unsigned char>(c)) ||
                      kTokenChars.find(c) != std::string_view::npos);
  }
  if (!valid) in.Fail(node, path, "not a valid HTTP header name");
  std::string lower = name;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.starts_with("streamcar-") || lower == "idempotency-key" || lower == "content-length" ||
      lower == "content-type" || lower == "host" || lower.starts_with("ce-")) {
    in.Fail(node, path, "streamcar sets this header itself; it cannot be overridden");
  }
}

// Headers merge: a subscription's header replaces the default's header of the same name.
void ReadHeaders(Reader& in, const Field<HandlerConfig>&, const YAML::Node&,
                 const YAML::Node& value, const std::string& path, HandlerConfig* out) {
  if (value.IsNull()) return;
  in.RequireMap(value, path);
  for (auto it : value) {
    const auto name = it.first.as<std::string>();
    const std::string header_path = path + "." + name;
    CheckHeaderName(in, it.first, header_path, name);
    const std::string text = in.Text(it.second, header_path);
    if (text.find_first_of("\r\n") != std::string::npos) {
      in.Fail(it.second, header_path, "header values must not contain line breaks");
    }
    out->headers[name] = text;
  }
}

void WriteHeaders(Writer& out, const Field<HandlerConfig>& field, const HandlerConfig& handler) {
  out << YAML::Key << std::string(field.key) << YAML::Value;
  if (handler.headers.empty()) out << YAML::Flow;
  out << YAML::BeginMap;
  for (const auto& [name, value] : handler.headers) {
    out << YAML::Key << name << YAML::Value << (IsSensitiveHeader(name) ? "***" : value);
  }
  out << YAML::EndMap;
}

// A list replaces the default's list; null is an empty list.
void ReadRejectStatuses(Reader& in, const Field<HandlerConfig>&, const YAML::Node&,
                        const YAML::Node& value, const std::string& path, HandlerConfig* out) {
  out->reject_statuses.clear();
  if (value.IsNull()) return;
  if (!value.IsSequence()) in.Fail(value, path, "must be a list of HTTP statuses");
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const auto status = static_cast<int>(in.Int(value[i], item_path, 100, 599));
    if (status < 300) {
      in.Fail(value[i], item_path, "must be 300..599: a 1xx or 2xx answer cannot be a rejection");
    }
    out->reject_statuses.push_back(status);
  }
}

void WriteRejectStatuses(Writer& out, const Field<HandlerConfig>& field,
                         const HandlerConfig& handler) {
  out << YAML::Key << std::string(field.key) << YAML::Value << YAML::Flow
      << handler.reject_statuses;
}

void ReadStart(Reader& in, const Field<Subscription>&, const YAML::Node& parent,
               const YAML::Node& value, const std::string& path, Subscription* out) {
  if (!value || value.IsNull()) {
    in.Fail(parent, path, "required: where a new group starts (new, beginning or an entry id)");
  }
  out->start = in.Text(value, path);
  if (out->start != "new" && out->start != "beginning" && !ParseEntryId(out->start)) {
    in.Fail(
        value, path,
        "must be new, beginning or an entry id like 1700000000000-0 (got \"" + out->start + "\")");
  }
}

void WriteStart(Writer& out, const Field<Subscription>& field, const Subscription& sub) {
  out << YAML::Key << std::string(field.key) << YAML::Value << sub.start;
}

// sharding.key_pattern: "" (the default) or a key with exactly one "%d", the shard index.
std::string CheckKeyPattern(const std::string& pattern) {
  if (pattern.empty()) return {};
  const size_t at = pattern.find("%d");
  if (at == std::string::npos) return "must contain %d (where the shard index goes)";
  if (pattern.find('%', at + 2) != std::string::npos || pattern.find('%') != at) {
    return "must contain exactly one %d and no other %";
  }
  return {};
}

// --- the tables, in the order `check` prints them --------------------------------------------

constexpr auto kTlsFields = std::to_array<Field<TlsConfig>>({
    Text<&TlsConfig::ca_file>("ca_file"),
    Text<&TlsConfig::cert_file>("cert_file"),
    Text<&TlsConfig::key_file>("key_file"),
    Text<&TlsConfig::server_name>("server_name"),
    Bool<&TlsConfig::verify>("verify"),
});

// `redis.sentinel` (SPEC 8). Every key may be "" with another mode (validate.cc), so that a chart
// can always pass ${VAR:-}.
constexpr auto kSentinelFields = std::to_array<Field<SentinelConfig>>({
    Text<&SentinelConfig::master>("master"),
    Custom<SentinelConfig>("addresses", &ReadAddresses<&SentinelConfig::addresses>,
                           &WriteAddresses<&SentinelConfig::addresses>),
    Text<&SentinelConfig::username>("username"),
    Text<&SentinelConfig::password>("password", kSecret),
});

constexpr auto kRedisFields = std::to_array<Field<RedisConfig>>({
    Custom<RedisConfig>("url", &ReadRedisUrl, &WriteRedisUrl),
    Text<&RedisConfig::username>("username"),
    Text<&RedisConfig::password>("password", kSecret),
    Duration<&RedisConfig::connect_timeout>("connect_timeout"),
    Duration<&RedisConfig::command_timeout>("command_timeout"),
    Section<&RedisConfig::tls, kTlsFields>("tls"),
    Enum<&RedisConfig::mode, kRedisModeNames>("mode"),
    Custom<RedisConfig>("nodes", &ReadAddresses<&RedisConfig::nodes>,
                        &WriteAddresses<&RedisConfig::nodes>),
    Section<&RedisConfig::sentinel, kSentinelFields>("sentinel"),
});

constexpr auto kHandlerFields = std::to_array<Field<HandlerConfig>>({
    Text<&HandlerConfig::url>("url", kUrlPassword, &CheckHttpUrl),
    Duration<&HandlerConfig::timeout>("timeout"),
    Int<&HandlerConfig::concurrency>("concurrency", 1, 1024),
    Int<&HandlerConfig::batch_size>("batch_size", 1, 1000),
    Size<&HandlerConfig::max_held_bytes>("max_held_bytes"),
    Enum<&HandlerConfig::format, kFormatNames>("format"),
    Text<&HandlerConfig::raw_field>("raw_field"),
    Custom<HandlerConfig>("headers", &ReadHeaders, &WriteHeaders),
    Text<&HandlerConfig::health_url>("health_url", kUrlPassword, &CheckOptionalHttpUrl),
    Custom<HandlerConfig>("reject_statuses", &ReadRejectStatuses, &WriteRejectStatuses),
    Real<&HandlerConfig::max_rps>("max_rps", 0.0, 1'000'000.0, MaxBound::kInclusive),
    // SPEC 11, handler targets (route_fields.h).
    Text<&HandlerConfig::unix_socket>("unix_socket", 0, &CheckUnixSocket),
    Section<&HandlerConfig::auth, kHandlerAuthFields>("auth"),
});

constexpr auto kRetryFields = std::to_array<Field<RetryConfig>>({
    Int<&RetryConfig::max_attempts>("max_attempts", 0, 1'000'000),
    Duration<&RetryConfig::initial_backoff>("initial_backoff"),
    Duration<&RetryConfig::max_backoff>("max_backoff"),
    Real<&RetryConfig::multiplier>("multiplier", 1.0, 100.0, MaxBound::kInclusive),
    Real<&RetryConfig::jitter>("jitter", 0.0, 1.0, MaxBound::kExclusive),
});

// `circuit_breaker` of a subscription (SPEC 11).
constexpr auto kCircuitBreakerFields = std::to_array<Field<CircuitBreakerConfig>>({
    Int<&CircuitBreakerConfig::failures>("failures", 0, 1'000'000),
    Duration<&CircuitBreakerConfig::open_for>("open_for"),
});

constexpr auto kDeadLetterFields = std::to_array<Field<DeadLetterConfig>>({
    [] {
      auto field = Text<&DeadLetterConfig::stream>("stream");
      field.write = &WriteDeadLetterStream;
      return field;
    }(),
    Int<&DeadLetterConfig::max_len>("max_len", 0, kMaxLen),
});

constexpr auto kClaimFields = std::to_array<Field<ClaimConfig>>({
    Duration<&ClaimConfig::min_idle>(
        "min_idle", Millis(100), "must be at least 100ms (leases are renewed every min_idle/3)"),
    Duration<&ClaimConfig::interval>("interval"),
    Int<&ClaimConfig::count>("count", 1, 10000),
});

constexpr auto kOrderingFields = std::to_array<Field<OrderingConfig>>({
    Text<&OrderingConfig::key_field>("key_field"),
});

constexpr auto kAckFields = std::to_array<Field<AckConfig>>({
    Bool<&AckConfig::delete_entries>("delete"),
});

// `retention` of a subscription (4.4) and of a log API stream (10): the same keys and rules.
constexpr auto kRetentionFields = std::to_array<Field<RetentionConfig>>({
    Int<&RetentionConfig::max_len>("max_len", 0, kMaxLen),
    Duration<&RetentionConfig::max_age>("max_age", Millis(0)),
    Duration<&RetentionConfig::interval>("interval"),
});

// `sharding` of a subscription (SPEC 9, SHARDING.md B1); the timing relations are validate.cc's.
constexpr auto kShardingFields = std::to_array<Field<ShardingConfig>>({
    Int<&ShardingConfig::shards>("shards", 0, keys::kMaxShards),
    Text<&ShardingConfig::key_pattern>("key_pattern", 0, &CheckKeyPattern),
    Text<&ShardingConfig::instance_id>("instance_id"),
    Duration<&ShardingConfig::session_timeout>("session_timeout"),
    Duration<&ShardingConfig::heartbeat_interval>("heartbeat_interval"),
    Duration<&ShardingConfig::rebalance_timeout>("rebalance_timeout"),
    Duration<&ShardingConfig::drain_timeout>("drain_timeout"),
    Duration<&ShardingConfig::initial_delay>("initial_delay", Millis(0)),
    Duration<&ShardingConfig::min_assignment_interval>("min_assignment_interval", Millis(0)),
    Enum<&ShardingConfig::static_takeover, kStaticTakeoverNames>("static_takeover"),
    Duration<&ShardingConfig::stall_timeout>("stall_timeout", Millis(0)),
    Bool<&ShardingConfig::revoke_stalled>("revoke_stalled"),
});

// A subscription; `defaults:` holds the same keys but the four kNotInDefaults ones.
constexpr auto kSubscriptionFields = std::to_array<Field<Subscription>>({
    Text<&Subscription::stream>("stream", kRequired | kNotInDefaults),
    Text<&Subscription::group>("group", kRequired | kNotInDefaults),
    Custom<Subscription>("start", &ReadStart, &WriteStart, kRequired | kNotInDefaults),
    Text<&Subscription::name>("name", kNotInDefaults),
    Section<&Subscription::handler, kHandlerFields>("handler"),
    Section<&Subscription::retry, kRetryFields>("retry"),
    Section<&Subscription::circuit_breaker, kCircuitBreakerFields>("circuit_breaker"),
    Section<&Subscription::dead_letter, kDeadLetterFields>("dead_letter"),
    Section<&Subscription::claim, kClaimFields>("claim"),
    Section<&Subscription::ordering, kOrderingFields>("ordering"),
    Section<&Subscription::ack, kAckFields>("ack"),
    Section<&Subscription::retention, kRetentionFields>("retention"),
    Section<&Subscription::sharding, kShardingFields>("sharding"),
    Custom<Subscription>("routes", &ReadRoutes, &WriteRoutes),  // SPEC 11 (route_fields.h)
});

constexpr auto kAdminFields = std::to_array<Field<AdminConfig>>({
    Text<&AdminConfig::listen>("listen", 0, &CheckListen),
});

constexpr auto kShutdownFields = std::to_array<Field<ShutdownConfig>>({
    Duration<&ShutdownConfig::drain_timeout>("drain_timeout", Millis(0)),
});

// log.level: read through the one level parser of common/log.h.
void ReadLogLevel(Reader& in, const Field<LogConfig>&, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, LogConfig* log) {
  auto level = ParseLogLevel(in.Text(value, path));
  if (!level.ok()) in.Fail(value, path, level.status().message());
  log->level = *level;
}

void WriteLogLevel(Writer& out, const Field<LogConfig>& field, const LogConfig& log) {
  out << YAML::Key << std::string(field.key) << YAML::Value << LogLevelName(log.level);
}

constexpr auto kLogFields = std::to_array<Field<LogConfig>>({
    Custom<LogConfig>("level", &ReadLogLevel, &WriteLogLevel),
});

constexpr auto kApiFields = std::to_array<Field<ApiConfig>>({
    Text<&ApiConfig::listen>("listen", 0, &CheckListen),
    Text<&ApiConfig::token_file>("token_file"),  // printed by path; its content is never read here
    Size<&ApiConfig::max_body>("max_body"),
    Duration<&ApiConfig::idempotency_ttl>("idempotency_ttl"),
    Duration<&ApiConfig::max_future_skew>("max_future_skew", Millis(0)),
    Custom<ApiConfig>("allowed_origins", &ReadOrigins, &WriteOrigins),
    Custom<ApiConfig>("max_follow_buffer", &ReadFollowBuffer, &WriteFollowBuffer),
});

constexpr auto kLogStreamFields = std::to_array<Field<LogStream>>({
    Text<&LogStream::name>("name", kRequired),
    Bool<&LogStream::produce>("produce"),
    Int<&LogStream::max_len>("max_len", 0, kMaxLen),
    Bool<&LogStream::notify>("notify"),
    Section<&LogStream::retention, kRetentionFields>("retention"),
    Bool<&LogStream::archive>("archive"),
});

constexpr auto kArchiveFields = std::to_array<Field<ArchiveConfig>>({
    Text<&ArchiveConfig::url>("url", kUrlPassword, &CheckArchiveUrl),
    Duration<&ArchiveConfig::interval>("interval"),
    Int<&ArchiveConfig::batch>("batch", 1, 100000),
});

std::string CheckServiceName(const std::string& name) {
  return name.empty() ? "must not be empty (the resource's service.name)" : std::string();
}

constexpr auto kTracingFields = std::to_array<Field<TracingConfig>>({
    Text<&TracingConfig::otlp_endpoint>("otlp_endpoint", kUrlPassword, &CheckOtlpEndpoint),
    Text<&TracingConfig::service_name>("service_name", 0, &CheckServiceName),
    Real<&TracingConfig::sample_ratio>("sample_ratio", 0.0, 1.0, MaxBound::kInclusive),
});

// consumer.reap_idle: 0s (off) or at least kMinReapIdle (SPEC 4.6). Shorter would remove the
// consumer of a pod that is only paused (a long GC, a node under pressure) for no gain: a dead
// consumer costs a line of XINFO CONSUMERS, not work.
void ReadReapIdle(Reader& in, const Field<Config>&, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, Config* config) {
  const Millis read = in.Duration(value, path, /*allow_zero=*/true);
  if (read.count() != 0 && read < kMinReapIdle) {
    in.Fail(value, path,
            "must be 0s (off) or at least " + FormatDuration(kMinReapIdle) + " (got " +
                FormatDuration(read) + ")");
  }
  config->consumer_reap_idle = read;
}

void WriteReapIdle(Writer& out, const Field<Config>& field, const Config& config) {
  out << YAML::Key << std::string(field.key) << YAML::Value
      << FormatDuration(config.consumer_reap_idle);
}

constexpr auto kConsumerFields = std::to_array<Field<Config>>({
    Text<&Config::consumer_name>("name"),
    Custom<Config>("reap_idle", &ReadReapIdle, &WriteReapIdle),
    Bool<&Config::consumer_wait_for_name>("wait_for_name"),
});

// `defaults:` is read into the reader; each subscription starts from it.
void ReadDefaults(Reader& in, const Field<Config>&, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, Config*) {
  in.RequireMap(value, path);
  ReadSection<Subscription>(in, value, path, kSubscriptionFields, &in.defaults, Scope::kDefaults);
}

void AppendDefaultsPaths(const std::string& prefix, std::vector<std::string>* out) {
  for (const auto& field : kSubscriptionFields) {
    if (field.flags & kNotInDefaults) continue;
    const std::string path = JoinPath(prefix, field.key);
    if (field.paths) {
      field.paths(path, out);
    } else {
      out->push_back(path);
    }
  }
}

// Read last: a file that serves `streams` (SPEC 10) may leave `subscriptions` out.
void ReadSubscriptions(Reader& in, const Field<Config>&, const YAML::Node& parent,
                       const YAML::Node& value, const std::string& path, Config* config) {
  if ((!value || value.IsNull()) && config->streams.empty()) {
    in.Fail(parent, path,
            "required: a list with at least one subscription (or a `streams` list, SPEC 10)");
  }
  if (!value || value.IsNull()) return;
  if (!value.IsSequence()) in.Fail(value, path, "must be a list of subscriptions");
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const YAML::Node item = value[i];
    in.RequireMap(item, item_path);
    Subscription sub = in.defaults;
    ReadSection<Subscription>(in, item, item_path, kSubscriptionFields, &sub);
    // SPEC 9: a `sharding:` block makes the subscription sharded, and the shard count is what
    // turns the mode on; a block without one would silently leave it a plain subscription.
    // (`shards: 0` says plain in so many words: `check` prints it so for a plain subscription.)
    if (const YAML::Node block = item["sharding"];
        block && block.IsMap() && !block["shards"] && !sub.sharding.enabled()) {
      in.Fail(block, item_path + ".sharding.shards",
              "required in a sharding block: the shard count (1 to " +
                  std::to_string(keys::kMaxShards) +
                  "); leave the block out for a plain subscription");
    }
    if (sub.name.empty()) sub.name = sub.stream + "/" + sub.group;
    config->subscriptions.push_back(std::move(sub));
    in.NoteItemLine("subscriptions", Reader::Line(item));
  }
}

constexpr auto kConfigFields = std::to_array<Field<Config>>({
    Int<&Config::version>("version", 1, 1),
    Section<&Config::redis, kRedisFields>("redis"),
    Group<kConsumerFields>("consumer"),
    Section<&Config::admin, kAdminFields>("admin"),
    Section<&Config::shutdown, kShutdownFields>("shutdown"),
    Section<&Config::log, kLogFields>("log"),
    [] {
      auto field = Custom<Config>("defaults", &ReadDefaults, nullptr, kNotPrinted);
      field.paths = &AppendDefaultsPaths;
      field.nested = true;
      return field;
    }(),
    [] {
      auto field = Custom<Config>("subscriptions", &ReadSubscriptions,
                                  &WriteList<&Config::subscriptions, kSubscriptionFields>,
                                  kRequired | kReadLast);
      field.paths = &ListPaths<&Config::subscriptions, kSubscriptionFields>;
      field.nested = true;
      return field;
    }(),
    Section<&Config::api, kApiFields>("api"),
    List<&Config::streams, kLogStreamFields>("streams"),
    Section<&Config::archive, kArchiveFields>("archive"),
    Section<&Config::tracing, kTracingFields>("tracing"),
});

}  // namespace

Fields<Config> ConfigFields() { return kConfigFields; }

std::vector<std::string> AcceptedKeyPaths() {
  std::vector<std::string> paths;
  AppendPaths<Config>(kConfigFields, "", &paths);
  return paths;
}

}  // namespace streamcar::config
