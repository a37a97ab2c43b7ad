#pragma once
// The configuration of SPEC sections 2 and 10 as plain structs. Their initializers are the
// defaults, spelled only here. Only the loader (loader.cc, fields.*) knows YAML; everything else
// reads these structs.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/log.h"
#include "sidecar/config/redis_url.h"

namespace streamcar::config {

struct TlsConfig {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::string server_name;
  bool verify = true;
};

// How streamcar finds the Redis node for a key (SPEC 8).
enum class RedisMode { kAuto, kStandalone, kCluster, kSentinel };
// The names of `redis.mode`, spelled once.
inline constexpr std::array<std::pair<std::string_view, RedisMode>, 4> kRedisModeNames = {
    {{"auto", RedisMode::kAuto},
     {"standalone", RedisMode::kStandalone},
     {"cluster", RedisMode::kCluster},
     {"sentinel", RedisMode::kSentinel}}};
const char* RedisModeName(RedisMode mode);

// `redis.sentinel`: the sentinels that name the master (mode: sentinel only).
struct SentinelConfig {
  std::string master;                  // the monitored master's name
  std::vector<std::string> addresses;  // "host:port" ("[::1]:26379"), asked in this order
  std::string username;                // the sentinels' own credentials, apart from the data
  std::string password;                // nodes' (redis.username / redis.password)
};

struct RedisConfig {
  RedisConfig();  // parses the default url into `endpoint`
  std::string url = "redis://127.0.0.1:6379/0";
  RedisEndpoint endpoint;  // `url` parsed, once, by the loader (and from the default above)
  std::string username;
  std::string password;
  Millis connect_timeout{2000};
  Millis command_timeout{5000};
  TlsConfig tls;
  RedisMode mode = RedisMode::kAuto;
  std::vector<std::string> nodes;  // cluster seeds besides the url's host, "host:port"
  SentinelConfig sentinel;
};

// kCloudEvents is the binary mode (attributes in ce-* headers); kCloudEventsStructured the
// structured mode (one application/cloudevents+json object); kDapr the structured event with
// Dapr's attributes, read with Dapr's answers (SPEC 11).
enum class Format { kJson, kRaw, kCloudEvents, kCloudEventsStructured, kDapr };
// The names of `handler.format`, spelled once (the loader, `check` and messages use them).
inline constexpr std::array<std::pair<std::string_view, Format>, 5> kFormatNames = {
    {{"json", Format::kJson},
     {"raw", Format::kRaw},
     {"cloudevents", Format::kCloudEvents},
     {"cloudevents-structured", Format::kCloudEventsStructured},
     {"dapr", Format::kDapr}}};
const char* FormatName(Format format);

// Whether a handler header carries a credential, so `check` prints its value as "***". The rule
// (docs/configuration.md): the name, in any case, contains "auth" (Authorization,
// Proxy-Authorization, X-Auth-...), "token", "secret", "key" (X-Api-Key), "password", "passwd",
// "cookie", "session", "signature" or "credential". Over-masking a harmless header costs a look
// at the file; under-masking leaks a secret into CI logs.
bool IsSensitiveHeader(std::string_view name);

// `handler.auth` (SPEC 11): how the handler knows a request comes from this sidecar.
struct HandlerAuthConfig {
  // Every request carries "Authorization: Bearer <the file's token>" (common/token_file.h), the
  // file re-read as it rotates (delivery/bearer_token.h).
  std::string bearer_token_file;
  // Every request carries Streamcar-Signature (delivery/request_auth.h); never printed.
  std::string hmac_secret;
};

struct HandlerConfig {
  std::string url;
  Millis timeout{10000};
  int concurrency = 16;
  int batch_size = 1;
  // Payload bytes (field names + values) held in memory at once (SPEC 4.2).
  uint64_t max_held_bytes = uint64_t{32} * 1024 * 1024;
  Format format = Format::kJson;
  std::string raw_field = "data";
  std::map<std::string, std::string> headers;
  std::string health_url;
  std::vector<int> reject_statuses = {400, 413, 415, 422};
  // Requests per second at most (SPEC 11): a token bucket whose burst is `concurrency`. 0: off.
  double max_rps = 0;
  // SPEC 11: set, every request to the handler (url, routes' urls, health_url) goes over this
  // Unix socket; the urls still give the path and the Host header.
  std::string unix_socket;
  HandlerAuthConfig auth;
  // Not a key of the file: format dapr's `topic` (SPEC 11), the stream the app subscribes to.
  // Empty: the subscription's stream. A shard of a sharded subscription has the shard's key as
  // its stream, so ShardSubscription keeps the subscription's stream here.
  std::string dapr_topic;
};

// SPEC 11: `failures` retry outcomes in a row open the breaker; after `open_for`, one probe.
struct CircuitBreakerConfig {
  int failures = 0;  // 0: off
  Millis open_for{30000};

  bool enabled() const { return failures > 0; }
};

// Format dapr with a url without a path ("http://host:port" or ".../"): the app is asked GET
// /dapr/subscribe at start for the route of each stream (SPEC 11, app/dapr_subscribe.h).
bool AsksAppForDaprRoutes(const HandlerConfig& handler);

struct RetryConfig {
  int max_attempts = 5;  // 0: retry forever
  Millis initial_backoff{1000};
  Millis max_backoff{60000};
  double multiplier = 2.0;
  double jitter = 0.2;
};

struct DeadLetterConfig {
  // Filled by the loader when empty (config/dead_letter_default.h): "<stream>:dlq", or in cluster
  // mode the same-slot name ("{orders}:dlq"); `stream_defaulted` remembers it, so that `auto` can
  // settle the name once the server says whether it is a cluster (SettleDeadLetterDefaults).
  std::string stream;
  bool stream_defaulted = false;
  // mode auto, defaulted, not settled yet: the name a cluster would get when it differs from
  // `stream` ("" otherwise). `check` prints it as a comment.
  std::string stream_if_cluster;
  int64_t max_len = 0;
};

struct ClaimConfig {
  Millis min_idle{60000};
  Millis interval{10000};
  int count = 100;
};

struct OrderingConfig {
  std::string key_field;
};

// What a new process does when its instance id is held by a live member (SHARDING.md B4 step 3).
enum class StaticTakeover { kImmediate, kWait };
inline constexpr std::array<std::pair<std::string_view, StaticTakeover>, 2> kStaticTakeoverNames = {
    {{"immediate", StaticTakeover::kImmediate}, {"wait", StaticTakeover::kWait}}};

// A sharded subscription (SPEC 9, SHARDING.md B1): the stream is split into `shards` shard
// streams, each owned by one member at a time. Off while shards is 0.
struct ShardingConfig {
  int shards = 0;
  std::string key_pattern;  // "" : "<stream>:{%d}" (ShardKeyPattern)
  std::string instance_id;  // static membership (a StatefulSet's pod name); "": dynamic
  Millis session_timeout{15000};
  Millis heartbeat_interval{3000};
  Millis rebalance_timeout{60000};
  Millis drain_timeout{20000};
  Millis initial_delay{3000};
  Millis min_assignment_interval{1000};
  StaticTakeover static_takeover = StaticTakeover::kImmediate;
  // SHARDING.md B6.1: a shard with entries waiting and no progress for this long is stalled
  // (0: never judged); with revoke_stalled the coordinator gives it to another member.
  Millis stall_timeout{0};
  bool revoke_stalled = false;

  bool enabled() const { return shards > 0; }
};

struct AckConfig {
  bool delete_entries = false;  // "ack.delete" in YAML
};

struct RetentionConfig {
  int64_t max_len = 0;
  Millis max_age{0};
  Millis interval{60000};
  bool enabled() const { return max_len > 0 || max_age.count() > 0; }
};

// One of a subscription's `routes` (SPEC 11): entries whose `field` equals (or starts with) the
// given text go to `url`, or with `drop` are acknowledged without a delivery. Exactly one of
// equals and prefix is set, and exactly one of url and drop (the loader checks both).
struct RouteConfig {
  std::string field;
  std::optional<std::string> equals;
  std::optional<std::string> prefix;
  std::string url;
  bool drop = false;
};

struct Subscription {
  std::string stream;
  std::string group;
  std::string start;  // "new" | "beginning" | an entry id
  std::string name;   // filled with "<stream>/<group>" when empty
  HandlerConfig handler;
  RetryConfig retry;
  CircuitBreakerConfig circuit_breaker;
  DeadLetterConfig dead_letter;
  ClaimConfig claim;
  OrderingConfig ordering;
  AckConfig ack;
  RetentionConfig retention;
  ShardingConfig sharding;
  std::vector<RouteConfig> routes;  // SPEC 11: first match wins; none matches: handler.url

  // The id for XGROUP CREATE: "$", "0" or the declared id.
  std::string StartId() const;
  // Sharded: the shard streams' key pattern, "<stream>:{%d}" unless sharding.key_pattern says.
  std::string ShardKeyPattern() const;
};

struct AdminConfig {
  std::string listen = "0.0.0.0:9464";  // empty: no admin server
};

struct ShutdownConfig {
  Millis drain_timeout{25000};
};

// The log API server (SPEC section 10).
struct ApiConfig {
  std::string listen;      // empty: no API server
  std::string token_file;  // set: every request needs "Authorization: Bearer <content>"
  uint64_t max_body = uint64_t{1024} * 1024;
  Millis idempotency_ttl{Millis(24LL * 60 * 60 * 1000)};
  // An explicit Streamcar-Entry-Id whose ms part is further ahead of Redis's clock is refused:
  // it would future-date every later automatic id (time windows, max_age retention).
  Millis max_future_skew{Millis(60 * 1000)};
  // A request carrying an Origin header (a browser's) is refused with 403 unless its value is
  // exactly one of these: a web page must not append or read through a user's browser.
  std::vector<std::string> allowed_origins;
  // What every SSE follower's unsent output may hold together (log/follow_pump.h).
  uint64_t max_follow_buffer = uint64_t{8} << 20;  // SPEC 10
};

// A stream the log API serves (SPEC section 10, `streams:`).
struct LogStream {
  std::string name;
  bool produce = true;  // false: read-only
  int64_t max_len = 0;  // >0: XADD ... MAXLEN ~ <n> on every append
  bool notify = false;  // PUBLISH <name>:events {"id":"<id>"} after each append
  RetentionConfig retention;
  bool archive = false;  // fold into the archive before trimming

  // Not keys of their own: filled from the sharded subscription that consumes this stream, if
  // any (SPEC 9). Its appends then go to the shard of their Streamcar-Key.
  int shards = 0;
  std::string shard_key_pattern;
};

// Where trimmed entries are folded (SPEC section 10, `archive:`).
struct ArchiveConfig {
  std::string url;  // sqlite:///path | postgres://...; empty: no archive
  Millis interval{30000};
  int batch = 1000;
};

// A span per delivery attempt, exported by OTLP/HTTP (SPEC 11, `tracing:`, docs/tracing.md).
struct TracingConfig {
  std::string otlp_endpoint;  // http://collector:4318/v1/traces; empty: tracing off
  std::string service_name = "streamcar";
  double sample_ratio = 1.0;  // for entries without a sampled parent
};

// `log:` (SPEC 2). The level is live on reload; a file without the key takes
// $STREAMCAR_LOG_LEVEL (the loader fills it in), and `info` when that is unset or empty.
struct LogConfig {
  LogLevel level = LogLevel::kInfo;
};

// consumer.reap_idle's least value when it is not 0s (SPEC 4.6).
inline constexpr Millis kMinReapIdle{3'600'000};

struct Config {
  std::string source_file;  // where it was loaded from, for messages
  int version = 1;
  RedisConfig redis;
  std::string consumer_name;  // filled with the host name when empty
  // SPEC 4.6: remove other consumers of each group idle longer than this with nothing pending
  // (0: never). At least kMinReapIdle when set.
  Millis consumer_reap_idle{0};
  // SPEC 4.7: a live process holding this consumer name's lease makes a new one wait for it
  // instead of exiting 1.
  bool consumer_wait_for_name = false;
  AdminConfig admin;
  ShutdownConfig shutdown;
  LogConfig log;
  std::vector<Subscription> subscriptions;
  ApiConfig api;
  std::vector<LogStream> streams;
  ArchiveConfig archive;
  TracingConfig tracing;
};

// Fills `stream`'s shards and shard_key_pattern from the sharded subscription of the same
// stream, if any (validate.cc refuses two that disagree); FillShardRouting does it for every
// `streams` entry.
void FillShardRoutingOf(const Config& config, LogStream* stream);
void FillShardRouting(Config* config);

}  // namespace streamcar::config
