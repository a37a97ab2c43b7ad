// Guards of the configuration's outside: what `streamcar check` prints, every error message
// byte for byte, and that every key the loader accepts is documented. They were written against
// the hand-written loader before it became table-driven (issue 13, WP5), so the refactor can be
// checked against them: none of these expectations may change when the code does.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sidecar/config/fields.h"
#include "sidecar/config/loader.h"
#include "sidecar/redis/connection.h"

namespace streamcar::config {
namespace {

EnvLookup Env(std::map<std::string, std::string> values = {}) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

Config Load(const std::string& yaml, const EnvLookup& env = Env()) {
  auto config = LoadConfigText(yaml, "test.yaml", env);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? *config : Config{};
}

// The text as a C++ string literal, so a failing expectation can be read (and pasted) exactly.
std::string Literal(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\x%02x", static_cast<unsigned char>(c));
      out += buffer;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string ReadSourceFile(const std::string& relative) {
  std::ifstream in(std::string(STREAMCAR_SOURCE_DIR) + "/" + relative, std::ios::binary);
  EXPECT_TRUE(in.good()) << relative;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// SPEC section 2's example, exactly as written there.
const char* kSpecExample = R"spec(version: 1
redis:
  url: redis://127.0.0.1:6379/0     # redis://, rediss:// (TLS) or unix:///path/to/socket
  username: ""                       # Redis ACL user (optional)
  password: ""                       # usually "${REDIS_PASSWORD}"; never printed by `check` or logs
  connect_timeout: 2s
  command_timeout: 5s                # for every non-blocking command
  tls:                               # used with rediss:// only
    ca_file: ""                      # empty: system trust store
    cert_file: ""                    # client certificate (mutual TLS), optional
    key_file: ""
    server_name: ""                  # SNI / verification name; default: host of the url
    verify: true
consumer:
  name: ${POD_NAME:-}                # empty: the host name
admin:
  listen: 0.0.0.0:9464               # /metrics /healthz /readyz; "" turns the server off
shutdown:
  drain_timeout: 25s                 # keep below the pod's terminationGracePeriodSeconds
defaults:                            # any subscription key below except stream/group/start/name
  handler: { url: http://127.0.0.1:8080/ }
subscriptions:
  - stream: orders                   # required
    group: billing                   # required
    start: new                       # required: new | beginning | <entry id>; where a NEW group starts
    name: orders-billing             # optional; label in logs and metrics; default "<stream>/<group>"
    handler:
      url: http://127.0.0.1:8080/orders   # required here or in defaults
      timeout: 10s                   # one request
      concurrency: 16                # max requests in flight for this subscription (1..1024)
      batch_size: 1                  # >1 turns on batch delivery (1..1000), section 3.4
      max_held_bytes: 32MiB          # payload bytes held in memory at once (4.2); sizes: B, KiB, MiB, GiB
      format: json                   # json | raw | cloudevents
      raw_field: data                # raw/cloudevents: the field whose bytes are the body
      headers: {}                    # static extra request headers
      health_url: ""                 # optional: while it does not answer 2xx, consumption pauses
      reject_statuses: [400, 413, 415, 422]   # dead-letter at once, no retry
    retry:
      max_attempts: 5                # deliveries before dead-letter; 0 means retry forever
      initial_backoff: 1s
      max_backoff: 60s
      multiplier: 2.0
      jitter: 0.2                    # +/- fraction applied to each backoff
    dead_letter:
      stream: orders:dlq             # default "<stream>:dlq"
      max_len: 0                     # >0: approximate cap on the DLQ length
    claim:
      min_idle: 60s                  # XAUTOCLAIM threshold for entries of other (dead) consumers
      interval: 10s                  # the reclaim beat
      count: 100
    ordering:
      key_field: ""                  # set: entries with equal values of this field are delivered one at a time, in id order
    ack:
      delete: false                  # true: delete the entry once acknowledged, section 4.3
    retention:                       # optional; its own beat, runs even when nothing is consumed
      max_len: 0                     # keep about this many newest entries (XTRIM MAXLEN ~)
      max_age: 0s                    # drop entries older than this (XTRIM MINID ~ now-max_age)
      interval: 60s
)spec";

const char* kMinimal = R"(version: 1
subscriptions:
  - stream: orders
    group: billing
    start: new
    handler:
      url: http://127.0.0.1:8080/orders
)";

// Every key set, almost every one away from its default: two subscriptions (the second only from
// `defaults`), two log API streams, an archive with a password, secrets to mask.
const char* kEveryKey = R"(version: 1
redis:
  url: rediss://app:urlsecret@redis.internal:6380/3
  username: svc
  password: hunter2
  connect_timeout: 1500ms
  command_timeout: 1m
  tls: { ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem, server_name: redis.example, verify: off }
  mode: sentinel
  nodes: []
  sentinel:
    master: mymaster
    addresses: ["s1.internal:26379", "[fd00::7]:26380"]
    username: sentry
    password: s3ntinel
consumer: { name: pod-3, reap_idle: 36h, wait_for_name: true }
admin: { listen: "[::1]:9000" }
shutdown: { drain_timeout: 0s }
log: { level: warn }
defaults:
  handler:
    url: https://app.internal:8443/in?x=1
    timeout: 1m30s
    concurrency: 1024
    batch_size: 1000
    max_held_bytes: 3072KiB
    headers: { X-Team: core, Authorization: "Bearer tok" }
    health_url: http://127.0.0.1:8080/health
    reject_statuses: []
    max_rps: 2.5
    unix_socket: ""
    auth: { bearer_token_file: "", hmac_secret: "0123456789abcdef-secret" }
  retry: { max_attempts: 0, initial_backoff: 250ms, max_backoff: 2h, multiplier: 1.5, jitter: 0 }
  claim: { min_idle: 100ms, interval: 1s, count: 10000 }
  routes: [{ field: type, prefix: "order.", url: "https://app.internal:8443/orders" }]
subscriptions:
  - stream: orders
    group: billing
    start: 1700000000000-5
    name: ""
    handler:
      format: raw
      raw_field: body
      batch_size: 1
      headers: { X-Team: billing, X-Api-Key: k3y }
      reject_statuses: [409, 599]
    retry: { jitter: 0.999 }
    circuit_breaker: { failures: 3, open_for: 1m }
    dead_letter: { stream: dead, max_len: 1099511627776 }
    ordering: { key_field: customer }
    ack: { delete: yes }
    retention: { max_len: 7, max_age: 168h, interval: 250ms }
    sharding: { shards: 0, key_pattern: "o:{%d}", instance_id: pod-3, session_timeout: 30s,
                heartbeat_interval: 5s, rebalance_timeout: 90s, drain_timeout: 25s,
                initial_delay: 0s, min_assignment_interval: 0s, static_takeover: wait,
                stall_timeout: 5m, revoke_stalled: yes }
    routes:
      - { field: type, equals: heartbeat, drop: true }
      - { field: kind, prefix: "", url: "http://127.0.0.1:8080/kind" }
  - stream: "weird: #stream"
    group: "g \"quoted\""
    start: beginning
    name: second
    handler: { format: cloudevents, batch_size: 1 }
api: { listen: "127.0.0.1:9465", token_file: /run/token, max_body: 2048KiB, idempotency_ttl: 90m,
       max_future_skew: 1m, allowed_origins: ["https://app.example.com"],
       max_follow_buffer: 8MiB }
streams:
  - { name: feed, produce: false, notify: true, archive: true,
      retention: { max_len: 10, max_age: 1h, interval: 5s } }
  - { name: capped, max_len: 7 }
archive: { url: "postgres://app:pgsecret@db:5432/log", interval: 10s, batch: 100000 }
tracing: { otlp_endpoint: "http://otel-collector:4318/v1/traces", service_name: billing, sample_ratio: 0.25 }
)";

const char* kSpecExampleCheck = R"yaml(version: 1
redis:
  url: redis://127.0.0.1:6379/0
  username: ""
  password: ""
  connect_timeout: 2s
  command_timeout: 5s
  tls:
    ca_file: ""
    cert_file: ""
    key_file: ""
    server_name: ""
    verify: true
  mode: auto
  nodes: []
  sentinel:
    master: ""
    addresses: []
    username: ""
    password: ""
consumer:
  name: pod-7
  reap_idle: 0s
  wait_for_name: false
admin:
  listen: 0.0.0.0:9464
shutdown:
  drain_timeout: 25s
log:
  level: info
subscriptions:
  - stream: orders
    group: billing
    start: new
    name: orders-billing
    handler:
      url: http://127.0.0.1:8080/orders
      timeout: 10s
      concurrency: 16
      batch_size: 1
      max_held_bytes: 32MiB
      format: json
      raw_field: data
      headers: {}
      health_url: ""
      reject_statuses: [400, 413, 415, 422]
      max_rps: 0
      unix_socket: ""
      auth:
        bearer_token_file: ""
        hmac_secret: ""
    retry:
      max_attempts: 5
      initial_backoff: 1s
      max_backoff: 1m
      multiplier: 2
      jitter: 0.2
    circuit_breaker:
      failures: 0
      open_for: 30s
    dead_letter:
      stream: orders:dlq
      max_len: 0
    claim:
      min_idle: 1m
      interval: 10s
      count: 100
    ordering:
      key_field: ""
    ack:
      delete: false
    retention:
      max_len: 0
      max_age: 0s
      interval: 1m
    sharding:
      shards: 0
      key_pattern: ""
      instance_id: ""
      session_timeout: 15s
      heartbeat_interval: 3s
      rebalance_timeout: 1m
      drain_timeout: 20s
      initial_delay: 3s
      min_assignment_interval: 1s
      static_takeover: immediate
      stall_timeout: 0s
      revoke_stalled: false
    routes: []
api:
  listen: ""
  token_file: ""
  max_body: 1MiB
  idempotency_ttl: 24h
  max_future_skew: 1m
  allowed_origins: []
  max_follow_buffer: 8MiB
streams: []
archive:
  url: ""
  interval: 30s
  batch: 1000
tracing:
  otlp_endpoint: ""
  service_name: streamcar
  sample_ratio: 1
)yaml";
const char* kMinimalCheck = R"yaml(version: 1
redis:
  url: redis://127.0.0.1:6379/0
  username: ""
  password: ""
  connect_timeout: 2s
  command_timeout: 5s
  tls:
    ca_file: ""
    cert_file: ""
    key_file: ""
    server_name: ""
    verify: true
  mode: auto
  nodes: []
  sentinel:
    master: ""
    addresses: []
    username: ""
    password: ""
consumer:
  name: the-host
  reap_idle: 0s
  wait_for_name: false
admin:
  listen: 0.0.0.0:9464
shutdown:
  drain_timeout: 25s
log:
  level: info
subscriptions:
  - stream: orders
    group: billing
    start: new
    name: orders/billing
    handler:
      url: http://127.0.0.1:8080/orders
      timeout: 10s
      concurrency: 16
      batch_size: 1
      max_held_bytes: 32MiB
      format: json
      raw_field: data
      headers: {}
      health_url: ""
      reject_statuses: [400, 413, 415, 422]
      max_rps: 0
      unix_socket: ""
      auth:
        bearer_token_file: ""
        hmac_secret: ""
    retry:
      max_attempts: 5
      initial_backoff: 1s
      max_backoff: 1m
      multiplier: 2
      jitter: 0.2
    circuit_breaker:
      failures: 0
      open_for: 30s
    dead_letter:
      stream: orders:dlq  # {orders}:dlq if the server is a cluster
      max_len: 0
    claim:
      min_idle: 1m
      interval: 10s
      count: 100
    ordering:
      key_field: ""
    ack:
      delete: false
    retention:
      max_len: 0
      max_age: 0s
      interval: 1m
    sharding:
      shards: 0
      key_pattern: ""
      instance_id: ""
      session_timeout: 15s
      heartbeat_interval: 3s
      rebalance_timeout: 1m
      drain_timeout: 20s
      initial_delay: 3s
      min_assignment_interval: 1s
      static_takeover: immediate
      stall_timeout: 0s
      revoke_stalled: false
    routes: []
api:
  listen: ""
  token_file: ""
  max_body: 1MiB
  idempotency_ttl: 24h
  max_future_skew: 1m
  allowed_origins: []
  max_follow_buffer: 8MiB
streams: []
archive:
  url: ""
  interval: 30s
  batch: 1000
tracing:
  otlp_endpoint: ""
  service_name: streamcar
  sample_ratio: 1
)yaml";
const char* kEveryKeyCheck = R"yaml(version: 1
redis:
  url: rediss://app:***@redis.internal:6380/3
  username: svc
  password: "***"
  connect_timeout: 1s500ms
  command_timeout: 1m
  tls:
    ca_file: /ca.pem
    cert_file: /c.pem
    key_file: /k.pem
    server_name: redis.example
    verify: false
  mode: sentinel
  nodes: []
  sentinel:
    master: mymaster
    addresses: [s1.internal:26379, "[fd00::7]:26380"]
    username: sentry
    password: "***"
consumer:
  name: pod-3
  reap_idle: 36h
  wait_for_name: true
admin:
  listen: "[::1]:9000"
shutdown:
  drain_timeout: 0s
log:
  level: warn
subscriptions:
  - stream: orders
    group: billing
    start: 1700000000000-5
    name: orders/billing
    handler:
      url: https://app.internal:8443/in?x=1
      timeout: 1m30s
      concurrency: 1024
      batch_size: 1
      max_held_bytes: 3MiB
      format: raw
      raw_field: body
      headers:
        Authorization: "***"
        X-Api-Key: "***"
        X-Team: billing
      health_url: http://127.0.0.1:8080/health
      reject_statuses: [409, 599]
      max_rps: 2.5
      unix_socket: ""
      auth:
        bearer_token_file: ""
        hmac_secret: "***"
    retry:
      max_attempts: 0
      initial_backoff: 250ms
      max_backoff: 2h
      multiplier: 1.5
      jitter: 0.999
    circuit_breaker:
      failures: 3
      open_for: 1m
    dead_letter:
      stream: dead
      max_len: 1099511627776
    claim:
      min_idle: 100ms
      interval: 1s
      count: 10000
    ordering:
      key_field: customer
    ack:
      delete: true
    retention:
      max_len: 7
      max_age: 168h
      interval: 250ms
    sharding:
      shards: 0
      key_pattern: o:{%d}
      instance_id: pod-3
      session_timeout: 30s
      heartbeat_interval: 5s
      rebalance_timeout: 1m30s
      drain_timeout: 25s
      initial_delay: 0s
      min_assignment_interval: 0s
      static_takeover: wait
      stall_timeout: 5m
      revoke_stalled: true
    routes:
      - field: type
        equals: heartbeat
        url: ""
        drop: true
      - field: kind
        prefix: ""
        url: http://127.0.0.1:8080/kind
        drop: false
  - stream: "weird: #stream"
    group: g "quoted"
    start: beginning
    name: second
    handler:
      url: https://app.internal:8443/in?x=1
      timeout: 1m30s
      concurrency: 1024
      batch_size: 1
      max_held_bytes: 3MiB
      format: cloudevents
      raw_field: data
      headers:
        Authorization: "***"
        X-Team: core
      health_url: http://127.0.0.1:8080/health
      reject_statuses: []
      max_rps: 2.5
      unix_socket: ""
      auth:
        bearer_token_file: ""
        hmac_secret: "***"
    retry:
      max_attempts: 0
      initial_backoff: 250ms
      max_backoff: 2h
      multiplier: 1.5
      jitter: 0
    circuit_breaker:
      failures: 0
      open_for: 30s
    dead_letter:
      stream: "weird: #stream:dlq"
      max_len: 0
    claim:
      min_idle: 100ms
      interval: 1s
      count: 10000
    ordering:
      key_field: ""
    ack:
      delete: false
    retention:
      max_len: 0
      max_age: 0s
      interval: 1m
    sharding:
      shards: 0
      key_pattern: ""
      instance_id: ""
      session_timeout: 15s
      heartbeat_interval: 3s
      rebalance_timeout: 1m
      drain_timeout: 20s
      initial_delay: 3s
      min_assignment_interval: 1s
      static_takeover: immediate
      stall_timeout: 0s
      revoke_stalled: false
    routes:
      - field: type
        prefix: order.
        url: https://app.internal:8443/orders
        drop: false
api:
  listen: 127.0.0.1:9465
  token_file: /run/token
  max_body: 2MiB
  idempotency_ttl: 1h30m
  max_future_skew: 1m
  allowed_origins: [https://app.example.com]
  max_follow_buffer: 8MiB
streams:
  - name: feed
    produce: false
    max_len: 0
    notify: true
    retention:
      max_len: 10
      max_age: 1h
      interval: 5s
    archive: true
  - name: capped
    produce: true
    max_len: 7
    notify: false
    retention:
      max_len: 0
      max_age: 0s
      interval: 1m
    archive: false
archive:
  url: postgres://app:***@db:5432/log
  interval: 10s
  batch: 100000
tracing:
  otlp_endpoint: http://otel-collector:4318/v1/traces
  service_name: billing
  sample_ratio: 0.25
)yaml";

TEST(Config, CheckOutputIsUnchanged) {
  const std::string spec = EmitEffectiveYaml(Load(kSpecExample, Env({{"POD_NAME", "pod-7"}})));
  EXPECT_EQ(spec, kSpecExampleCheck) << Literal(spec);
  Config minimal = Load(kMinimal);
  EXPECT_FALSE(minimal.consumer_name.empty());
  minimal.consumer_name = "the-host";  // the host name, which differs from machine to machine
  const std::string minimal_check = EmitEffectiveYaml(minimal);
  EXPECT_EQ(minimal_check, kMinimalCheck) << Literal(minimal_check);
  const std::string every = EmitEffectiveYaml(Load(kEveryKey));
  EXPECT_EQ(every, kEveryKeyCheck) << Literal(every);
  // What check prints loads again and prints the same, but for the comment on a default
  // dead-letter stream that mode auto leaves open: loaded again, the printed name is explicit.
  for (const std::string& printed : {spec, minimal_check, every}) {
    std::string settled = printed;
    const std::string comment = "  # {orders}:dlq if the server is a cluster";
    if (auto at = settled.find(comment); at != std::string::npos) settled.erase(at, comment.size());
    EXPECT_EQ(EmitEffectiveYaml(Load(printed)), settled);
  }
}

// One rejected input per rule of the loader and of validation, with the whole message: users and
// the black-box tests compare them exactly.
struct BadInput {
  std::string yaml;
  std::string message;
};

const std::string kSubHead =
    "version: 1\nsubscriptions:\n  - stream: orders\n    group: billing\n    start: new\n";
// A subscription with `extra` (4-space indented keys) after a valid handler.
std::string Sub(const std::string& extra) {
  return kSubHead + "    handler: { url: \"http://h/\" }\n" + extra;
}
// A subscription whose handler has the extra keys `handler`.
std::string Handler(const std::string& handler) {
  return kSubHead + "    handler: { url: \"http://h/\", " + handler + " }\n";
}
// `top` (top-level keys) before a valid subscription.
std::string Top(const std::string& top) { return "version: 1\n" + top + Sub("").substr(11); }
// `top` before a valid log API stream.
std::string Log(const std::string& top) { return "version: 1\nstreams: [{name: a}]\n" + top; }

const std::vector<BadInput>& BadInputs() {
  static const std::vector<BadInput> kInputs = {
      {"", "test.yaml: the file is empty (see SPEC section 2)"},
      {"# only a comment\n", "test.yaml: the file is empty (see SPEC section 2)"},
      {"version 1\n", "test.yaml:1: (top level): must be a mapping of keys to values"},
      {"- a\n", "test.yaml:1: (top level): must be a mapping of keys to values"},
      {"version: 1\n[a]: 1\n", "test.yaml:2: keys must be plain names"},
      {"version: 1\nversion: 1\n", "test.yaml:2: version: duplicate key"},
      {"version: 1\nzzzzzz: 1\n", "test.yaml:2: zzzzzz: unknown key"},
      {"version: 1\nsubscription: []\n",
       "test.yaml:2: subscription: unknown key (did you mean subscriptions?)"},
      {"version: 2\n", "test.yaml:1: version: must be between 1 and 1 (got 2)"},
      {"version: one\n", "test.yaml:1: version: must be a whole number (got \"one\")"},
      {"version: [1]\n", "test.yaml:1: version: must be a single value, not a list or mapping"},
      {"version: 1\nredis: []\n", "test.yaml:2: redis: must be a mapping of keys to values"},
      {"version: 1\nredis: { urll: x }\n",
       "test.yaml:2: redis.urll: unknown key (did you mean url?)"},
      {"version: 1\nredis: { url: \"http://r:6379\" }\n",
       "test.yaml:2: redis.url: URL must start with redis://, rediss:// or unix:// (got "
       "\"http://r:6379\")"},
      {"version: 1\nredis: { url: \"redis://r:99999\" }\n",
       "test.yaml:2: redis.url: invalid port \"99999\" (1 to 65535) in redis://r:99999"},
      {"version: 1\nredis: { url: \"unix://relative.sock\" }\n",
       "test.yaml:2: redis.url: a unix URL needs an absolute socket path "
       "(unix:///path/to/redis.sock) in unix://relative.sock"},
      {"version: 1\nredis: { url: \"redis://\" }\n", "test.yaml:2: redis.url: no host in redis://"},
      {"version: 1\nredis: { password: \"${REDIS_PASSWORD}\" }\n",
       "test.yaml:2: redis.password: environment variable REDIS_PASSWORD is not set (set it, or "
       "write ${REDIS_PASSWORD:-default})"},
      {"version: 1\nredis: { password: \"${BAD\" }\n",
       "test.yaml:2: redis.password: unterminated variable reference \"${BAD\""},
      {"version: 1\nredis: { connect_timeout: 0s }\n",
       "test.yaml:2: redis.connect_timeout: must be greater than 0s"},
      {"version: 1\nredis: { command_timeout: 5 }\n",
       "test.yaml:2: redis.command_timeout: duration \"5\" has no unit (write e.g. 5s or 5ms)"},
      {"version: 1\nredis: { command_timeout: -5s }\n",
       "test.yaml:2: redis.command_timeout: negative duration \"-5s\""},
      {"version: 1\nredis: { command_timeout: 3d }\n",
       "test.yaml:2: redis.command_timeout: duration \"3d\" has unknown unit \"d\" (units: ms, s, "
       "m, h)"},
      {"version: 1\nredis: { tls: x }\n",
       "test.yaml:2: redis.tls: must be a mapping of keys to values"},
      {"version: 1\nredis: { tls: { verfy: true } }\n",
       "test.yaml:2: redis.tls.verfy: unknown key (did you mean verify?)"},
      {"version: 1\nredis: { tls: { verify: maybe } }\n",
       "test.yaml:2: redis.tls.verify: must be true or false (got \"maybe\")"},
      {Top("redis: { tls: { cert_file: /c.pem } }\n"),
       "test.yaml:2: redis.tls.key_file: cert_file and key_file go together (mutual TLS needs "
       "both)"},
      {Top("redis: { tls: { key_file: /k.pem } }\n"),
       "test.yaml:2: redis.tls.cert_file: cert_file and key_file go together (mutual TLS needs "
       "both)"},
      // SPEC 8: redis.mode, redis.nodes, redis.sentinel.
      {"version: 1\nredis: { mode: clustr }\n",
       "test.yaml:2: redis.mode: must be auto, standalone, cluster or sentinel (got \"clustr\"); "
       "did you mean cluster?"},
      {"version: 1\nredis: { mode: ha }\n",
       "test.yaml:2: redis.mode: must be auto, standalone, cluster or sentinel (got \"ha\")"},
      {"version: 1\nredis: { mod: cluster }\n",
       "test.yaml:2: redis.mod: unknown key (did you mean mode?)"},
      {"version: 1\nredis: { nodes: \"10.0.0.6:6379\" }\n",
       "test.yaml:2: redis.nodes: must be a list of host:port addresses, e.g. [\"10.0.0.6:6379\"]"},
      {"version: 1\nredis: { nodes: [\"10.0.0.6\"] }\n",
       "test.yaml:2: redis.nodes[0]: \"10.0.0.6\": no port: expected host:port"},
      {"version: 1\nredis: { nodes: [\"a:6379\", \"b:0\"] }\n",
       "test.yaml:2: redis.nodes[1]: \"b:0\": port \"0\" is not a number from 1 to 65535"},
      {"version: 1\nredis: { nodes: [\"redis://a:6379\"] }\n",
       "test.yaml:2: redis.nodes[0]: \"redis://a:6379\": a URL: expected host:port (the scheme and "
       "credentials come from redis.url)"},
      {"version: 1\nredis: { nodes: [\"::1:6379\"] }\n",
       "test.yaml:2: redis.nodes[0]: \"::1:6379\": an IPv6 address needs brackets: [::1]:6379"},
      {"version: 1\nredis: { nodes: [\"a:6379\", \"b:6379\", \"a:6379\"] }\n",
       "test.yaml:2: redis.nodes[2]: a:6379 is listed twice (also redis.nodes[0])"},
      {"version: 1\nredis: { nodes: [[a]] }\n",
       "test.yaml:2: redis.nodes[0]: must be a single value, not a list or mapping"},
      {"version: 1\nredis: { sentinel: x }\n",
       "test.yaml:2: redis.sentinel: must be a mapping of keys to values"},
      {"version: 1\nredis: { sentinel: { mastr: m } }\n",
       "test.yaml:2: redis.sentinel.mastr: unknown key (did you mean master?)"},
      {"version: 1\nredis: { sentinel: { addresses: [\"s1:26379\", \"s1:26379\"] } }\n",
       "test.yaml:2: redis.sentinel.addresses[1]: s1:26379 is listed twice (also "
       "redis.sentinel.addresses[0])"},
      {"version: 1\nredis: { sentinel: { addresses: [\"[fd00::1]\"] } }\n",
       "test.yaml:2: redis.sentinel.addresses[0]: \"[fd00::1]\": no port: expected [ipv6]:port"},
      {Top("redis: { mode: cluster, url: \"unix:///run/redis.sock\" }\n"),
       "test.yaml:2: redis.url: a cluster is reached over TCP: mode: cluster needs a redis:// or "
       "rediss:// url"},
      {Top("redis: { mode: cluster, url: \"redis://r:6379/3\" }\n"),
       "test.yaml:2: redis.url: database 3: a cluster has only database 0"},
      {Top("redis: { mode: standalone, nodes: [\"a:6379\"] }\n"),
       "test.yaml:2: redis.nodes: cluster seed nodes: only with mode: cluster or auto (mode is "
       "standalone)"},
      {Top("redis:\n  mode: sentinel\n  nodes: [\"a:6379\"]\n"
           "  sentinel: { master: m, addresses: [\"s:26379\"] }\n"),
       "test.yaml:3: redis.nodes: cluster seed nodes: only with mode: cluster or auto (mode is "
       "sentinel; the sentinels go in redis.sentinel.addresses)"},
      {Top("redis: { url: \"unix:///run/redis.sock\", nodes: [\"a:6379\"] }\n"),
       "test.yaml:2: redis.nodes: cluster seed nodes need a redis:// or rediss:// url: a cluster "
       "is "
       "reached over TCP"},
      {Top("redis: { mode: sentinel, sentinel: { addresses: [\"s:26379\"] } }\n"),
       "test.yaml:2: redis.sentinel.master: required with mode: sentinel (the name the sentinels "
       "monitor the master by)"},
      {Top("redis: { mode: sentinel, sentinel: { master: m, addresses: [] } }\n"),
       "test.yaml:2: redis.sentinel.addresses: required with mode: sentinel (host:port of each "
       "sentinel)"},
      {Top("redis:\n  mode: sentinel\n  url: \"unix:///run/redis.sock\"\n"
           "  sentinel: { master: m, addresses: [\"s:26379\"] }\n"),
       "test.yaml:3: redis.url: the master the sentinels name is reached over TCP: mode: sentinel "
       "needs a redis:// or rediss:// url (its scheme, database and credentials apply; its host "
       "and "
       "port are not used)"},
      {Top("redis: { sentinel: { master: m } }\n"),
       "test.yaml:2: redis.sentinel.master: only with mode: sentinel (mode is auto)"},
      {Top("redis: { mode: cluster, sentinel: { addresses: [\"s:26379\"] } }\n"),
       "test.yaml:2: redis.sentinel.addresses: only with mode: sentinel (mode is cluster)"},
      {Top("redis: { mode: standalone, sentinel: { username: u } }\n"),
       "test.yaml:2: redis.sentinel.username: only with mode: sentinel (mode is standalone)"},
      {Top("redis: { sentinel: { master: \"\", password: pw } }\n"),
       "test.yaml:2: redis.sentinel.password: only with mode: sentinel (mode is auto)"},
      {Top("redis: { mode: sentinel, sentinel: { master: m, addresses: [\"s:26379\"], username: u "
           "} }\n"),
       "test.yaml:2: redis.sentinel.username: needs redis.sentinel.password (the sentinels' AUTH "
       "takes both)"},
      {"version: 1\nconsumer: x\n", "test.yaml:2: consumer: must be a mapping of keys to values"},
      {"version: 1\nconsumer: { nam: x }\n",
       "test.yaml:2: consumer.nam: unknown key (did you mean name?)"},
      {"version: 1\nconsumer: { name: [a] }\n",
       "test.yaml:2: consumer.name: must be a single value, not a list or mapping"},
      {"version: 1\nconsumer: { reap_idle: 30m }\n",
       "test.yaml:2: consumer.reap_idle: must be 0s (off) or at least 1h (got 30m)"},
      {"version: 1\nconsumer: { reap_idle: 59m59s }\n",
       "test.yaml:2: consumer.reap_idle: must be 0s (off) or at least 1h (got 59m59s)"},
      {"version: 1\nconsumer: { wait_for_name: maybe }\n",
       "test.yaml:2: consumer.wait_for_name: must be true or false (got \"maybe\")"},
      {"version: 1\nconsumer: { reap_idle: 1 }\n",
       "test.yaml:2: consumer.reap_idle: duration \"1\" has no unit (write e.g. 1s or 1ms)"},
      {"version: 1\nadmin: { lisen: x }\n",
       "test.yaml:2: admin.lisen: unknown key (did you mean listen?)"},
      {"version: 1\nadmin: { listen: \"9464\" }\n",
       "test.yaml:2: admin.listen: must be host:port, e.g. 127.0.0.1:9465 or [::1]:9465 (or \"\" "
       "for off)"},
      {"version: 1\nadmin: { listen: \":9464\" }\n",
       "test.yaml:2: admin.listen: must be host:port, e.g. 127.0.0.1:9465 or [::1]:9465 (or \"\" "
       "for off)"},
      {"version: 1\nadmin: { listen: \"0.0.0.0:0\" }\n",
       "test.yaml:2: admin.listen: port must be 1..65535 (got \"0\")"},
      {"version: 1\nadmin: { listen: \"h:x1\" }\n",
       "test.yaml:2: admin.listen: port must be 1..65535 (got \"x1\")"},
      {"version: 1\nshutdown: { drain_timeout: 3d }\n",
       "test.yaml:2: shutdown.drain_timeout: duration \"3d\" has unknown unit \"d\" (units: ms, s, "
       "m, h)"},
      {"version: 1\nshutdown: { drain: 3s }\n", "test.yaml:2: shutdown.drain: unknown key"},
      {"version: 1\ndefaults: x\n", "test.yaml:2: defaults: must be a mapping of keys to values"},
      {"version: 1\ndefaults:\n  stream: x\n",
       "test.yaml:3: defaults.stream: not allowed in defaults (set it in each subscription)"},
      {"version: 1\ndefaults:\n  name: x\n",
       "test.yaml:3: defaults.name: not allowed in defaults (set it in each subscription)"},
      {"version: 1\ndefaults:\n  handlr: {}\n",
       "test.yaml:3: defaults.handlr: unknown key (did you mean handler?)"},
      {"version: 1\ndefaults:\n  retry: { max_attempts: -1 }\n",
       "test.yaml:3: defaults.retry.max_attempts: must be between 0 and 1000000 (got -1)"},
      {"version: 1\n",
       "test.yaml:1: subscriptions: required: a list with at least one subscription (or a "
       "`streams` list, SPEC 10)"},
      {"version: 1\nsubscriptions:\n",
       "test.yaml:1: subscriptions: required: a list with at least one subscription (or a "
       "`streams` list, SPEC 10)"},
      {"version: 1\nsubscriptions: []\n",
       "test.yaml: subscriptions: at least one subscription is required (or a `streams` list for "
       "the log API)"},
      {"version: 1\nsubscriptions: {stream: s}\n",
       "test.yaml:2: subscriptions: must be a list of subscriptions"},
      {"version: 1\nsubscriptions: [x]\n",
       "test.yaml:2: subscriptions[0]: must be a mapping of keys to values"},
      {"version: 1\nsubscriptions: [{group: g, start: new}]\n",
       "test.yaml:2: subscriptions[0].stream: required"},
      {"version: 1\nsubscriptions: [{stream: \"\", group: g, start: new}]\n",
       "test.yaml:2: subscriptions[0].stream: must not be empty"},
      {"version: 1\nsubscriptions: [{stream: s, start: new}]\n",
       "test.yaml:2: subscriptions[0].group: required"},
      {"version: 1\nsubscriptions: [{stream: s, group: g}]\n",
       "test.yaml:2: subscriptions[0].start: required: where a new group starts (new, beginning or "
       "an entry id)"},
      {"version: 1\nsubscriptions: [{stream: s, group: g, start: }]\n",
       "test.yaml:2: subscriptions[0].start: required: where a new group starts (new, beginning or "
       "an entry id)"},
      {"version: 1\nsubscriptions: [{stream: s, group: g, start: latest}]\n",
       "test.yaml:2: subscriptions[0].start: must be new, beginning or an entry id like "
       "1700000000000-0 (got \"latest\")"},
      {"version: 1\nsubscriptions: [{stream: s, group: g, start: new, nme: x}]\n",
       "test.yaml:2: subscriptions[0].nme: unknown key (did you mean name?)"},
      {"version: 1\nsubscriptions: [{stream: s, group: g, start: new}]\n",
       "test.yaml:2: subscriptions[0].handler.url: required (set it here or in "
       "defaults.handler.url)"},
      {Sub("    handler: { url: \"http://h/\" }\n"),
       "test.yaml:7: subscriptions[0].handler: duplicate key"},
      {Sub("    retry: [1, 2]\n"),
       "test.yaml:7: subscriptions[0].retry: must be a mapping of keys to values"},
      {Sub("    retry:\n      max_attemps: 3\n"),
       "test.yaml:8: subscriptions[0].retry.max_attemps: unknown key (did you mean max_attempts?)"},
      {Sub("    retry: { max_attempts: many }\n"),
       "test.yaml:7: subscriptions[0].retry.max_attempts: must be a whole number (got \"many\")"},
      {Sub("    retry: { max_attempts: 1000001 }\n"),
       "test.yaml:7: subscriptions[0].retry.max_attempts: must be between 0 and 1000000 (got "
       "1000001)"},
      {Sub("    retry: { max_attempts: \"\" }\n"),
       "test.yaml:7: subscriptions[0].retry.max_attempts: must be a whole number (got \"\")"},
      {Sub("    retry: { initial_backoff: -1s }\n"),
       "test.yaml:7: subscriptions[0].retry.initial_backoff: negative duration \"-1s\""},
      {Sub("    retry: { max_backoff: 0s }\n"),
       "test.yaml:7: subscriptions[0].retry.max_backoff: must be greater than 0s"},
      {Sub("    retry: { multiplier: 0.5 }\n"),
       "test.yaml:7: subscriptions[0].retry.multiplier: must be at least 1 and at most 100 (got "
       "0.5)"},
      {Sub("    retry: { multiplier: 100.5 }\n"),
       "test.yaml:7: subscriptions[0].retry.multiplier: must be at least 1 and at most 100 (got "
       "100.5)"},
      {Sub("    retry: { multiplier: two }\n"),
       "test.yaml:7: subscriptions[0].retry.multiplier: must be a number (got \"two\")"},
      {Sub("    retry: { multiplier: \" 2\" }\n"),
       "test.yaml:7: subscriptions[0].retry.multiplier: must be a number (got \" 2\")"},
      {Sub("    retry: { jitter: 1.0 }\n"),
       "test.yaml:7: subscriptions[0].retry.jitter: must be at least 0 and below 1 (got 1.0)"},
      {Sub("    retry: { jitter: -0.1 }\n"),
       "test.yaml:7: subscriptions[0].retry.jitter: must be at least 0 and below 1 (got -0.1)"},
      {Sub("    retry: { initial_backoff: 10s, max_backoff: 1s }\n"),
       "test.yaml:3: subscriptions[0].retry.max_backoff: must not be below retry.initial_backoff"},
      {Sub("    retry: { max_attempts: 1 }\n    retry: { max_attempts: 2 }\n"),
       "test.yaml:8: subscriptions[0].retry: duplicate key"},
      {Sub("    dead_letter: { stream: orders }\n"),
       "test.yaml:3: subscriptions[0].dead_letter.stream: must differ from the subscription's "
       "stream"},
      {Sub("    dead_letter: { max_len: -5 }\n"),
       "test.yaml:7: subscriptions[0].dead_letter.max_len: must be between 0 and 1099511627776 "
       "(got -5)"},
      {Sub("    dead_letter: { stram: x }\n"),
       "test.yaml:7: subscriptions[0].dead_letter.stram: unknown key (did you mean stream?)"},
      {Sub("    claim: { min_idle: 60 }\n"),
       "test.yaml:7: subscriptions[0].claim.min_idle: duration \"60\" has no unit (write e.g. 60s "
       "or 60ms)"},
      {Sub("    claim: { min_idle: 10ms }\n"),
       "test.yaml:7: subscriptions[0].claim.min_idle: must be at least 100ms (leases are renewed "
       "every min_idle/3)"},
      {Sub("    claim: { interval: 0s }\n"),
       "test.yaml:7: subscriptions[0].claim.interval: must be greater than 0s"},
      {Sub("    claim: { count: 0 }\n"),
       "test.yaml:7: subscriptions[0].claim.count: must be between 1 and 10000 (got 0)"},
      {Sub("    claim: { cont: 1 }\n"),
       "test.yaml:7: subscriptions[0].claim.cont: unknown key (did you mean count?)"},
      {Sub("    ordering: { key: x }\n"),
       "test.yaml:7: subscriptions[0].ordering.key: unknown key"},
      {Sub("    ordering: [x]\n"),
       "test.yaml:7: subscriptions[0].ordering: must be a mapping of keys to values"},
      {Sub("    ack: { delete: maybe }\n"),
       "test.yaml:7: subscriptions[0].ack.delete: must be true or false (got \"maybe\")"},
      {Sub("    ack: { delet: true }\n"),
       "test.yaml:7: subscriptions[0].ack.delet: unknown key (did you mean delete?)"},
      {Sub("    retention: { max_len: -1 }\n"),
       "test.yaml:7: subscriptions[0].retention.max_len: must be between 0 and 1099511627776 (got "
       "-1)"},
      {Sub("    retention: { max_age: 1x }\n"),
       "test.yaml:7: subscriptions[0].retention.max_age: duration \"1x\" has unknown unit \"x\" "
       "(units: ms, s, m, h)"},
      {Sub("    retention: { interval: 0s }\n"),
       "test.yaml:7: subscriptions[0].retention.interval: must be greater than 0s"},
      {Sub("    retention: { max_lenn: 1 }\n"),
       "test.yaml:7: subscriptions[0].retention.max_lenn: unknown key (did you mean max_len?)"},
      {kSubHead,
       "test.yaml:3: subscriptions[0].handler.url: required (set it here or in "
       "defaults.handler.url)"},
      {kSubHead + "    handler: x\n",
       "test.yaml:6: subscriptions[0].handler: must be a mapping of keys to values"},
      {kSubHead + "    handler: { url: \"ftp://h/\" }\n",
       "test.yaml:6: subscriptions[0].handler.url: must be an http:// or https:// URL (got "
       "\"ftp://h/\")"},
      {kSubHead + "    handler: { url: \"http://:80/\" }\n",
       "test.yaml:6: subscriptions[0].handler.url: no host in http://:80/"},
      {kSubHead + "    handler: { url: \"http://u:p@h/\" }\n",
       "test.yaml:6: subscriptions[0].handler.url: credentials are not sent from the URL (put "
       "them in the handler's headers or auth) in http://u:***@h/"},
      {kSubHead + "    handler: { url: \"ftp://x\\ty\" }\n",
       "test.yaml:6: subscriptions[0].handler.url: must be an http:// or https:// URL (got "
       "\"ftp://x\\ty\")"},
      {kSubHead + "    handler: { urll: \"http://h/\" }\n",
       "test.yaml:6: subscriptions[0].handler.urll: unknown key (did you mean url?)"},
      {Handler("timeout: 0s"),
       "test.yaml:6: subscriptions[0].handler.timeout: must be greater than 0s"},
      {Handler("concurrency: 0"),
       "test.yaml:6: subscriptions[0].handler.concurrency: must be between 1 and 1024 (got 0)"},
      {Handler("concurrency: 1025"),
       "test.yaml:6: subscriptions[0].handler.concurrency: must be between 1 and 1024 (got 1025)"},
      {Handler("concurency: 2"),
       "test.yaml:6: subscriptions[0].handler.concurency: unknown key (did you mean concurrency?)"},
      {Handler("batch_size: 1001"),
       "test.yaml:6: subscriptions[0].handler.batch_size: must be between 1 and 1000 (got 1001)"},
      {Handler("batch_size: 10, format: raw"),
       "test.yaml:3: subscriptions[0].handler.batch_size: batch delivery (batch_size > 1) needs "
       "format: json or cloudevents-structured (format is raw)"},
      {Handler("batch_size: 2, format: cloudevents"),
       "test.yaml:3: subscriptions[0].handler.batch_size: batch delivery (batch_size > 1) needs "
       "format: json or cloudevents-structured (format is cloudevents)"},
      {Handler("batch_size: 2, format: dapr"),
       "test.yaml:3: subscriptions[0].handler.batch_size: batch delivery (batch_size > 1) needs "
       "format: json or cloudevents-structured (format is dapr)"},
      {Handler("format: cloudevent"),
       "test.yaml:6: subscriptions[0].handler.format: must be json, raw, cloudevents, "
       "cloudevents-structured or dapr (got \"cloudevent\"); did you mean cloudevents?"},
      {Handler("max_held_bytes: 1048576"),
       "test.yaml:6: subscriptions[0].handler.max_held_bytes: size \"1048576\" has no unit (write "
       "e.g. 1048576MiB or 1048576B)"},
      {Handler("max_held_bytes: -1MiB"),
       "test.yaml:6: subscriptions[0].handler.max_held_bytes: negative size \"-1MiB\""},
      {Handler("max_held_bytes: 0MiB"),
       "test.yaml:6: subscriptions[0].handler.max_held_bytes: must be greater than 0B"},
      {Handler("max_held_bytes: 1MB"),
       "test.yaml:6: subscriptions[0].handler.max_held_bytes: size \"1MB\" has unknown unit \"MB\" "
       "(units: B, KiB, MiB, GiB)"},
      {Handler("max_held_bytes: \"\""),
       "test.yaml:6: subscriptions[0].handler.max_held_bytes: empty size (write e.g. 32MiB, "
       "512KiB, 1GiB)"},
      {Handler("format: jsn"),
       "test.yaml:6: subscriptions[0].handler.format: must be json, raw, cloudevents, "
       "cloudevents-structured or dapr (got \"jsn\"); did you mean json?"},
      {Handler("format: xml"),
       "test.yaml:6: subscriptions[0].handler.format: must be json, raw, cloudevents, "
       "cloudevents-structured or dapr (got \"xml\")"},
      {kSubHead + "    handler: { url: \"https://127.0.0.1:3000\", format: dapr }\n",
       "test.yaml:3: subscriptions[0].handler.url: format dapr without a path asks the app GET "
       "/dapr/subscribe over http:// only; use an http:// url or give the url the route's path"},
      {Handler("format: raw, raw_field: \"\""),
       "test.yaml:3: subscriptions[0].handler.raw_field: required with format: raw"},
      {Handler("headers: [a]"),
       "test.yaml:6: subscriptions[0].handler.headers: must be a mapping of keys to values"},
      {Handler("headers: { Idempotency-Key: x }"),
       "test.yaml:6: subscriptions[0].handler.headers.Idempotency-Key: streamcar sets this header "
       "itself; it cannot be overridden"},
      {Handler("headers: { Streamcar-Id: x }"),
       "test.yaml:6: subscriptions[0].handler.headers.Streamcar-Id: streamcar sets this header "
       "itself; it cannot be overridden"},
      {Handler("headers: { ce-type: x }"),
       "test.yaml:6: subscriptions[0].handler.headers.ce-type: streamcar sets this header itself; "
       "it cannot be overridden"},
      {Handler("headers: { \"bad header\": x }"),
       "test.yaml:6: subscriptions[0].handler.headers.bad header: not a valid HTTP header name"},
      {Handler("headers: { X-A: \"a\\r\\nb\" }"),
       "test.yaml:6: subscriptions[0].handler.headers.X-A: header values must not contain line "
       "breaks"},
      {Handler("health_url: \"h:1/health\""),
       "test.yaml:6: subscriptions[0].handler.health_url: must be an http:// or https:// URL (got "
       "\"h:1/health\")"},
      {Handler("reject_statuses: 400"),
       "test.yaml:6: subscriptions[0].handler.reject_statuses: must be a list of HTTP statuses"},
      {Handler("reject_statuses: [200]"),
       "test.yaml:6: subscriptions[0].handler.reject_statuses[0]: must be 300..599: a 1xx or 2xx "
       "answer cannot be a rejection"},
      {Handler("reject_statuses: [400, 700]"),
       "test.yaml:6: subscriptions[0].handler.reject_statuses[1]: must be between 100 and 599 (got "
       "700)"},
      {Handler("reject_statuses: [x]"),
       "test.yaml:6: subscriptions[0].handler.reject_statuses[0]: must be a whole number (got "
       "\"x\")"},
      {Sub("") + "  - stream: orders\n    group: billing\n    start: beginning\n    name: other\n"
                 "    handler: { url: \"http://h/\" }\n",
       "test.yaml:7: subscriptions[1]: stream \"orders\" with group \"billing\" is already "
       "subscribed by an earlier subscription"},
      {Sub("") + "  - stream: orders\n    group: other\n    start: new\n    name: orders/billing\n"
                 "    handler: { url: \"http://h/\" }\n",
       "test.yaml:7: subscriptions[1].name: name \"orders/billing\" is used by an earlier "
       "subscription"},
      {"version: 1\napi: x\nstreams: [{name: a}]\n",
       "test.yaml:2: api: must be a mapping of keys to values"},
      {"version: 1\napi: { listn: \"127.0.0.1:1\" }\nstreams: [{name: a}]\n",
       "test.yaml:2: api.listn: unknown key (did you mean listen?)"},
      {Log("api: { listen: \"9465\" }\n"),
       "test.yaml:3: api.listen: must be host:port, e.g. 127.0.0.1:9465 or [::1]:9465 (or \"\" for "
       "off)"},
      {Log("api: { listen: \"h:99999\" }\n"),
       "test.yaml:3: api.listen: port must be 1..65535 (got \"99999\")"},
      {Log("api: { listen: \"0.0.0.0:9464\" }\n"),
       "test.yaml:3: api.listen: must differ from admin.listen (0.0.0.0:9464)"},
      {Log("api: { max_body: 0B }\n"), "test.yaml:3: api.max_body: must be greater than 0B"},
      {Log("api: { max_body: 1024 }\n"),
       "test.yaml:3: api.max_body: size \"1024\" has no unit (write e.g. 1024MiB or 1024B)"},
      {Log("api: { idempotency_ttl: 0s }\n"),
       "test.yaml:3: api.idempotency_ttl: must be greater than 0s"},
      {Log("api: { token_file: [a] }\n"),
       "test.yaml:3: api.token_file: must be a single value, not a list or mapping"},
      {"version: 1\nstreams: feed\n", "test.yaml:2: streams: must be a list of streams"},
      {"version: 1\nstreams: [feed]\n",
       "test.yaml:2: streams[0]: must be a mapping of keys to values"},
      {"version: 1\nstreams: []\n",
       "test.yaml:1: subscriptions: required: a list with at least one subscription (or a "
       "`streams` list, SPEC 10)"},
      {"version: 1\nsubscriptions: []\nstreams: []\n",
       "test.yaml: subscriptions: at least one subscription is required (or a `streams` list for "
       "the log API)"},
      {"version: 1\nstreams:\n  - produce: true\n", "test.yaml:3: streams[0].name: required"},
      {"version: 1\nstreams:\n  - name: \"\"\n", "test.yaml:3: streams[0].name: must not be empty"},
      {"version: 1\nstreams:\n  - name: a\n  - name: b\n  - name: a\n",
       "test.yaml:5: streams[2].name: stream \"a\" is listed by an earlier stream"},
      {"version: 1\nstreams:\n  - name: a\n    max_lenn: 3\n",
       "test.yaml:4: streams[0].max_lenn: unknown key (did you mean max_len?)"},
      {"version: 1\nstreams:\n  - name: a\n    max_len: -1\n",
       "test.yaml:4: streams[0].max_len: must be between 0 and 1099511627776 (got -1)"},
      {"version: 1\nstreams:\n  - name: a\n    produce: maybe\n",
       "test.yaml:4: streams[0].produce: must be true or false (got \"maybe\")"},
      {"version: 1\nstreams:\n  - name: a\n    notify: 1\n",
       "test.yaml:4: streams[0].notify: must be true or false (got \"1\")"},
      {"version: 1\nstreams:\n  - name: a\n    archive: yess\n",
       "test.yaml:4: streams[0].archive: must be true or false (got \"yess\")"},
      {"version: 1\nstreams:\n  - name: a\n    retention: { max_agee: 1s }\n",
       "test.yaml:4: streams[0].retention.max_agee: unknown key (did you mean max_age?)"},
      {"version: 1\nstreams:\n  - name: a\n    retention: { max_len: -5 }\n",
       "test.yaml:4: streams[0].retention.max_len: must be between 0 and 1099511627776 (got -5)"},
      {"version: 1\nstreams:\n  - name: a\n  - name: b\n    archive: true\n",
       "test.yaml:4: streams[1].archive: archive: true needs archive.url (sqlite:///path or "
       "postgres://...)"},
      {"version: 1\nstreams: [{name: feed, archive: true, max_len: 100}]\n"
       "archive: { url: \"sqlite:///tmp/a.db\" }\n",
       "test.yaml:2: streams[0].max_len: stream \"feed\" has archive: true; max_len would trim "
       "entries before they are archived (use retention.max_len, which folds them first)"},
      {"version: 1\nstreams: [{name: feed, archive: true}]\n"
       "archive: { url: \"sqlite:///tmp/a.db\" }\n"
       "subscriptions:\n  - name: mailer\n    stream: feed\n    group: g\n    start: new\n"
       "    handler: { url: \"http://h/\" }\n    ack: { delete: true }\n",
       "test.yaml:5: subscriptions[0].ack.delete: subscription \"mailer\" deletes acknowledged "
       "entries of stream \"feed\", which is archived (streams: archive: true): entries would be "
       "lost before they are folded; drop ack.delete (retention trims after folding)"},
      {Log("archive: x\n"), "test.yaml:3: archive: must be a mapping of keys to values"},
      {Log("archive: { batchh: 3 }\n"),
       "test.yaml:3: archive.batchh: unknown key (did you mean batch?)"},
      {Log("archiv: {}\n"), "test.yaml:3: archiv: unknown key (did you mean archive?)"},
      {Log("archive: { url: \"mysql://u:pw@h/db\" }\n"),
       "test.yaml:3: archive.url: must be sqlite:///path or postgres://user@host:5432/db (got "
       "\"mysql://u:***@h/db\")"},
      {Log("archive: { url: \"sqlite://relative.db\" }\n"),
       "test.yaml:3: archive.url: a SQLite archive is sqlite:///absolute/path/to/file.db in "
       "sqlite://relative.db"},
      {Log("archive: { url: \"postgres://\" }\n"),
       "test.yaml:3: archive.url: a PostgreSQL URL has no host in postgres://"},
      {Log("archive: { batch: 0 }\n"),
       "test.yaml:3: archive.batch: must be between 1 and 100000 (got 0)"},
      {Log("archive: { batch: 100001 }\n"),
       "test.yaml:3: archive.batch: must be between 1 and 100000 (got 100001)"},
      {Log("archive: { interval: 0s }\n"),
       "test.yaml:3: archive.interval: must be greater than 0s"},
      {Log("tracing: { otlp_endpoint: \"https://collector:4318/v1/traces\" }\n"),
       "test.yaml:3: tracing.otlp_endpoint: must be an http:// URL (got "
       "\"https://collector:4318/v1/traces\"): the OTLP exporter speaks plain HTTP; send to a "
       "collector agent that forwards over TLS"},
      {Log("tracing: { otlp_endpoint: \"collector:4318\" }\n"),
       "test.yaml:3: tracing.otlp_endpoint: must be an http:// URL such as "
       "http://otel-collector:4318/v1/traces (got \"collector:4318\")"},
      {Log("tracing: { otlp_endpoint: \"http:///v1/traces\" }\n"),
       "test.yaml:3: tracing.otlp_endpoint: no host in http:///v1/traces"},
      {Log("tracing: { service_name: \"\" }\n"),
       "test.yaml:3: tracing.service_name: must not be empty (the resource's service.name)"},
      {Log("tracing: { sample_ratio: 1.5 }\n"),
       "test.yaml:3: tracing.sample_ratio: must be at least 0 and at most 1 (got 1.5)"},
      {Log("tracing: { sample_ratio: nan }\n"),
       "test.yaml:3: tracing.sample_ratio: must be a number (got \"nan\")"},
      {"version: 1\nsubscriptions:\n  - stream: [unclosed\n",
       "test.yaml:4:1: invalid YAML: end of sequence flow not found"},
      {"version: 1\n\tbad: 1\n",
       "test.yaml:2:1: invalid YAML: illegal tab when looking for indentation"},
  };
  return kInputs;
}

TEST(Config, ErrorMessagesAreUnchanged) {
  for (const auto& [yaml, message] : BadInputs()) {
    auto config = LoadConfigText(yaml, "test.yaml", Env());
    ASSERT_FALSE(config.ok()) << "accepted:\n" << yaml;
    EXPECT_EQ(config.status().message(), message)
        << "input " << Literal(yaml) << "\nactual  " << Literal(config.status().message());
  }
}

// --- EveryKeyIsDocumented -------------------------------------------------------------------

// Key paths as the docs write them: a list item is "[]" ("streams[].name"), and the keys a
// subscription shares with `defaults` are written without their parent ("handler.url").
const std::set<std::string> kSubscriptionIdentity = {"stream", "group", "start", "name"};

std::string Join(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// The leaf key paths of a YAML tree. A sequence of mappings is walked as "<key>[]"; any other
// sequence, a scalar and an empty mapping (`headers: {}`) are leaves.
void CollectLeaves(const YAML::Node& node, const std::string& path, std::set<std::string>* out) {
  if (node.IsMap() && node.size() > 0) {
    for (auto it : node) CollectLeaves(it.second, Join(path, it.first.as<std::string>()), out);
    return;
  }
  if (node.IsSequence() && node.size() > 0 && node[0].IsMap()) {
    for (auto item : node) CollectLeaves(item, path + "[]", out);
    return;
  }
  out->insert(path);
}

// A subscription's keys as the docs write them: identity keys under "subscriptions[]", the rest
// (shared with `defaults`) bare.
std::string DocumentedForm(const std::string& path) {
  for (const std::string prefix : {"subscriptions[].", "defaults."}) {
    if (!path.starts_with(prefix)) continue;
    const std::string rest = path.substr(prefix.size());
    if (kSubscriptionIdentity.count(rest)) return path;
    return rest;
  }
  return path;
}

// The keys of a file as the docs write them; a path below an accepted leaf (a header name under
// `handler.headers`) counts as that leaf.
std::set<std::string> KeysOf(const YAML::Node& file, const std::set<std::string>& accepted) {
  std::set<std::string> leaves;
  CollectLeaves(file, "", &leaves);
  std::set<std::string> keys;
  for (const auto& leaf : leaves) {
    std::string key = DocumentedForm(leaf);
    for (const auto& known : accepted) {
      if (key.starts_with(known + ".") || key.starts_with(known + "[].")) key = known;
    }
    keys.insert(key);
    if (leaf.starts_with("defaults.")) keys.insert("defaults");
  }
  return keys;
}

// Every key the loader accepts: what `check` prints (it prints every key, with one subscription
// and one stream), plus `defaults`, which check does not print (it is merged into each
// subscription).
std::set<std::string> AcceptedKeys() {
  Config config = Load(std::string(kMinimal) + "streams: [{ name: feed }]\n");
  std::set<std::string> leaves;
  CollectLeaves(YAML::Load(EmitEffectiveYaml(config)), "", &leaves);
  std::set<std::string> keys;
  for (const auto& leaf : leaves) keys.insert(DocumentedForm(leaf));
  keys.insert("defaults");
  return keys;
}

TEST(Config, AcceptedKeysAreWhatTheLoaderReads) {
  const auto keys = AcceptedKeys();
  // Sanity of the walk itself: a sample of each section, and no list index or map value leaked.
  for (const char* key : {"version",
                          "redis.url",
                          "redis.tls.verify",
                          "redis.mode",
                          "redis.nodes",
                          "redis.sentinel.addresses",
                          "redis.sentinel.password",
                          "consumer.name",
                          "admin.listen",
                          "shutdown.drain_timeout",
                          "log.level",
                          "subscriptions[].stream",
                          "subscriptions[].name",
                          "handler.headers",
                          "handler.reject_statuses",
                          "retry.jitter",
                          "ack.delete",
                          "retention.interval",
                          "api.max_body",
                          "streams[].name",
                          "streams[].retention.max_age",
                          "archive.batch"}) {
    EXPECT_EQ(keys.count(key), 1u) << key;
  }
  EXPECT_EQ(keys.size(), 93u) << [&] {
    std::string all;
    for (const auto& k : keys) all += k + " ";
    return all;
  }();
  // The file made of exactly these keys loads (an unknown key would be an error).
  EXPECT_TRUE(LoadConfigText(kEveryKey, "test.yaml", Env()).ok());
  EXPECT_EQ(KeysOf(YAML::Load(kEveryKey), keys), keys);
}

// The keys named in the first column of the reference tables of docs/configuration.md.
std::vector<std::string> TableKeys(const std::string& doc) {
  std::vector<std::string> keys;
  std::istringstream lines(doc);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("| `")) continue;
    keys.push_back(line.substr(3, line.find('`', 3) - 3));
  }
  return keys;
}

bool Mentions(const std::string& text, const std::string& key) {
  return text.find("`" + key + "`") != std::string::npos;
}

TEST(Config, EveryKeyIsDocumented) {
  const auto keys = AcceptedKeys();
  const std::string doc = ReadSourceFile("docs/configuration.md");
  const auto rows = TableKeys(doc);
  ASSERT_GT(rows.size(), 50u);
  for (const auto& key : keys) {
    // Its own row, or a mention in the rules ("`version` must be `1`"), or the leaf named in the
    // row of its section ("| `redis.tls.*` | | `ca_file`, `cert_file`, ...").
    bool found = Mentions(doc, key);
    const std::string leaf = key.substr(key.rfind('.') + 1);
    for (size_t dot = key.find('.'); !found && dot != std::string::npos;
         dot = key.find('.', dot + 1)) {
      const std::string section = key.substr(0, dot);
      std::istringstream lines(doc);
      std::string line;
      while (!found && std::getline(lines, line)) {
        found = (line.starts_with("| `" + section + "` |") ||
                 line.starts_with("| `" + section + ".*` |")) &&
                Mentions(line, leaf);
      }
    }
    EXPECT_TRUE(found) << key << " is accepted by the loader but not in docs/configuration.md";
  }
  // And no row names a key the loader does not accept.
  for (auto row : rows) {
    if (row.ends_with(".*")) row.resize(row.size() - 2);
    bool accepted = false;
    for (const auto& key : keys) accepted = accepted || key == row || key.starts_with(row + ".");
    EXPECT_TRUE(accepted) << "docs/configuration.md documents `" << row
                          << "`, which the loader does not accept";
  }

  // The example file sets every key, each where it belongs, and is itself valid.
  const std::string example = ReadSourceFile("config/streamcar.example.yaml");
  auto loaded = LoadConfigText(example, "config/streamcar.example.yaml", Env());
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  const auto example_keys = KeysOf(YAML::Load(example), keys);
  for (const auto& key : keys) {
    EXPECT_EQ(example_keys.count(key), 1u)
        << key << " is accepted by the loader but not in config/streamcar.example.yaml";
  }
}

// The tables are the one spelling of the keys: what they list is exactly what check prints (plus
// `defaults`, whose keys are a subscription's but stream, group, start and name).
TEST(Config, TablesListExactlyTheAcceptedKeys) {
  const auto keys = AcceptedKeys();
  std::set<std::string> from_tables;
  std::set<std::string> defaults;
  for (const auto& path : AcceptedKeyPaths()) {
    if (path.starts_with("defaults.")) {
      defaults.insert(path.substr(9));
      from_tables.insert("defaults");
    } else {
      from_tables.insert(DocumentedForm(path));
    }
  }
  EXPECT_EQ(from_tables, keys);
  // `defaults` holds a subscription's sections, and nothing else (no stream, group, start, name).
  std::set<std::string> body;
  for (const auto& key : keys) {
    for (const char* section : {"handler.", "retry.", "dead_letter.", "claim.", "ordering.", "ack.",
                                "retention.", "sharding.", "circuit_breaker."}) {
      if (key.starts_with(section)) body.insert(key);
    }
    if (key == "routes") body.insert(key);  // SPEC 11: a list, one key
  }
  EXPECT_EQ(body.size(), 44u);
  EXPECT_EQ(defaults, body);
}

// redis.url is parsed once, by the loader; the connection takes the parsed endpoint.
TEST(Config, RedisUrlIsParsedOnceIntoTheEndpoint) {
  const Config defaults = Load(kMinimal);
  EXPECT_EQ(defaults.redis.endpoint.kind, RedisEndpoint::Kind::kTcp);
  EXPECT_EQ(defaults.redis.endpoint.host, "127.0.0.1");
  EXPECT_EQ(defaults.redis.endpoint.port, 6379);
  EXPECT_EQ(defaults.redis.endpoint.db, 0);

  const Config tcp = Load("version: 1\nredis: { url: \"rediss://app:urlpw@r.internal:6380/2\" }\n" +
                          std::string(kMinimal).substr(11));
  EXPECT_EQ(tcp.redis.endpoint.kind, RedisEndpoint::Kind::kTls);
  EXPECT_EQ(tcp.redis.endpoint.host, "r.internal");
  EXPECT_EQ(tcp.redis.endpoint.port, 6380);
  EXPECT_EQ(tcp.redis.endpoint.db, 2);
  auto options = redis::ConnectionOptionsOf(tcp);
  EXPECT_EQ(options.endpoint.host, "r.internal");
  EXPECT_EQ(options.endpoint.port, 6380);
  EXPECT_EQ(options.username, "app");  // from the URL: the config's fields are empty
  EXPECT_EQ(options.password, "urlpw");

  const Config unix_socket =
      Load("version: 1\nredis: { url: \"unix:///run/redis.sock?db=3\", password: pw }\n" +
           std::string(kMinimal).substr(11));
  EXPECT_EQ(unix_socket.redis.endpoint.kind, RedisEndpoint::Kind::kUnix);
  EXPECT_EQ(unix_socket.redis.endpoint.path, "/run/redis.sock");
  EXPECT_EQ(unix_socket.redis.endpoint.db, 3);
  EXPECT_EQ(redis::ConnectionOptionsOf(unix_socket).endpoint.path, "/run/redis.sock");
  EXPECT_EQ(redis::ConnectionOptionsOf(unix_socket).password, "pw");
}

}  // namespace
}  // namespace streamcar::config
