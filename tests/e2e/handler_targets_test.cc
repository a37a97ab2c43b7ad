// SPEC 11's handler targets through the real binary, a real redis-server and real HTTP: handler
// auth (a bearer token that rotates under the running sidecar, by a rewrite and by the atomic
// symlink swap of a Kubernetes volume; an HMAC signature over the exact body of every format, a
// batch and the health check), a handler on a Unix socket, and routes and filters.

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  return path;
}

// A token as the kubelet mounts a projected service-account token: the file lives in a
// timestamped directory, `..data` points at that directory, `token` points at `..data/token`.
// Rotate() is the kubelet's atomic writer: a new directory, a new `..data` renamed over the old
// one, the old directory removed.
class TokenVolume {
 public:
  TokenVolume(std::string dir, const std::string& first) : dir_(std::move(dir)) {
    Write(first);
    fs::create_symlink("..data/token", dir_ + "/token");
  }
  std::string path() const { return dir_ + "/token"; }
  void Rotate(const std::string& token) { Write(token); }

 private:
  void Write(const std::string& token) {
    const std::string stamp = "..2026_12_03_" + std::to_string(++generation_);
    fs::create_directory(dir_ + "/" + stamp);
    WriteFile(dir_ + "/" + stamp + "/token", token);
    fs::create_directory_symlink(stamp, dir_ + "/..data_tmp");
    fs::rename(dir_ + "/..data_tmp", dir_ + "/..data");
    if (!previous_.empty()) fs::remove_all(dir_ + "/" + previous_);
    previous_ = stamp;
  }

  std::string dir_;
  std::string previous_;
  int generation_ = 0;
};

// "t=<t>,v1=<hex>" as the handler computes it: HMAC-SHA256(secret, "<t>.<body>") by OpenSSL's
// one-shot HMAC, independent of the sidecar's own code.
std::string ExpectedSignature(const std::string& secret, const std::string& t,
                              const std::string& body) {
  const std::string signed_text = t + "." + body;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(signed_text.data()), signed_text.size(), digest,
       &length);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xf];
  }
  return "t=" + t + ",v1=" + hex;
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class HandlerAuthTest : public E2eTest {
 protected:
  std::string dir_ = MakeTempDir("streamcar-auth-");
  ~HandlerAuthTest() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
};

// Two subscriptions, one per way a token file changes: `orders` reads a plain file that is
// rewritten in place, `kube` a projected token rotated by the symlink swap. Entries flow every
// 50 ms; from each change, the first request carrying the new token must come within the
// documented bound (BearerToken::kRecheck, 1 s, plus one delivery), and none after it carries the
// old one. Then the plain file disappears: requests keep the last good token, one error is logged
// (not one per request), and a file that comes back is read again.
TEST_F(HandlerAuthTest, BearerTokenFollowsARewriteAndTheSymlinkSwap) {
  const std::string plain = WriteFile(dir_ + "/token", "plain-1\n");
  fs::create_directory(dir_ + "/volume");
  TokenVolume volume(dir_ + "/volume", "eyJhbGciOiJSUzI1NiJ9.kube-1.sig");
  SidecarConfig c;
  c.handler_url = handler_.url("/orders");
  c.handler_extra = "auth: { bearer_token_file: \"" + plain + "\" }";
  c.subscription_extra =
      "  - stream: kube\n    group: billing\n    start: beginning\n"
      "    handler: { url: \"" +
      handler_.url("/kube") + "\", auth: { bearer_token_file: \"" + volume.path() + "\" } }\n";
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(WaitReady()) << sidecar->Logs();
  const auto tokens_on = [&](const std::string& path) {
    std::vector<std::string> seen;
    for (const auto& r : handler_.Requests()) {
      if (r.path == path) seen.push_back(r.Header("authorization"));
    }
    return seen;
  };
  Add({"n", "0"});
  Add({"n", "0"}, "kube");
  ASSERT_TRUE(handler_.WaitForCount(2, seconds(10))) << sidecar->Logs();
  EXPECT_EQ(tokens_on("/orders"), std::vector<std::string>{"Bearer plain-1"});
  EXPECT_EQ(tokens_on("/kube"), std::vector<std::string>{"Bearer eyJhbGciOiJSUzI1NiJ9.kube-1.sig"});

  // Both change at once; entries keep flowing until both new tokens have arrived.
  const auto changed = Clock::now();
  WriteFile(plain, "plain-2\n");
  volume.Rotate("eyJhbGciOiJSUzI1NiJ9.kube-2.sig");
  std::optional<Clock::duration> plain_after;
  std::optional<Clock::duration> kube_after;
  for (int n = 1; n < 100 && !(plain_after && kube_after); ++n) {
    Add({"n", std::to_string(n)});
    Add({"n", std::to_string(n)}, "kube");
    std::this_thread::sleep_for(milliseconds(50));
    const auto tokens = tokens_on("/orders");
    if (!plain_after && tokens.back() == "Bearer plain-2") plain_after = Clock::now() - changed;
    if (!kube_after && tokens_on("/kube").back() == "Bearer eyJhbGciOiJSUzI1NiJ9.kube-2.sig") {
      kube_after = Clock::now() - changed;
    }
  }
  ASSERT_TRUE(plain_after && kube_after) << sidecar->Logs();
  // The bound: one recheck (1 s), plus one 50 ms step and the delivery.
  EXPECT_LT(*plain_after, milliseconds(1500));
  EXPECT_LT(*kube_after, milliseconds(1500));
  for (const std::string path : {"/orders", "/kube"}) {
    const auto tokens = tokens_on(path);
    const auto first_new = std::find_if(tokens.begin(), tokens.end(), [](const std::string& t) {
      return t.find("-2") != std::string::npos;
    });
    EXPECT_TRUE(std::all_of(first_new, tokens.end(),
                            [](const std::string& t) { return t.find("-2") != std::string::npos; }))
        << path << ": the old token came back after the new one";
  }
  EXPECT_NE(sidecar->Logs().find("handler.auth.bearer_token_file changed"), std::string::npos);

  // The plain file disappears: deliveries go on with the last good token, logged once.
  fs::remove(plain);
  const size_t before = handler_.Count();
  for (int n = 0; n < 30; ++n) {  // 1.5 s: the file is looked at again at least once
    Add({"gone", std::to_string(n)});
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_TRUE(handler_.WaitForCount(before + 30, seconds(10))) << sidecar->Logs();
  for (const auto& token : tokens_on("/orders")) EXPECT_NE(token, "") << "a request without it";
  EXPECT_EQ(tokens_on("/orders").back(), "Bearer plain-2");
  const std::string logs = sidecar->Logs();
  const std::string complaint = "handler.auth.bearer_token_file has no usable token";
  ASSERT_NE(logs.find(complaint), std::string::npos) << logs;
  EXPECT_EQ(logs.find(complaint, logs.find(complaint) + 1), std::string::npos)
      << "logged more than once:\n"
      << logs;
  EXPECT_EQ(PendingCount(), 0);

  // Back, with a new token.
  WriteFile(plain, "plain-3\n");
  ASSERT_TRUE(Eventually(
      [&] {
        Add({"back", "1"});
        std::this_thread::sleep_for(milliseconds(50));
        return tokens_on("/orders").back() == "Bearer plain-3";
      },
      seconds(5)))
      << sidecar->Logs();
  EXPECT_NE(sidecar->Logs().find("handler.auth.bearer_token_file is readable again"),
            std::string::npos);
  for (const std::string token : {"plain-1", "plain-2", "plain-3", "kube-1", "kube-2"}) {
    EXPECT_EQ(sidecar->Logs().find(token), std::string::npos) << "a token in the log";
  }
}

// A token file without a usable token at start: `check` and `run` exit 2 naming the key and the
// file, before anything connects (no Redis is needed to find out).
TEST_F(HandlerAuthTest, NoUsableTokenAtStartExitsTwoNamingTheKey) {
  SidecarConfig c;
  c.handler_extra = "auth: { bearer_token_file: \"" + dir_ + "/missing\" }";
  const std::string path = WriteConfig(c);
  const std::string expected = "subscriptions[0].handler.auth.bearer_token_file: cannot read " +
                               dir_ + "/missing: No such file or directory";
  for (const char* command : {"check", "run"}) {
    const auto result = RunStreamcar({command, "-c", path});
    EXPECT_EQ(result.exit_code, 2) << command << ": " << result.err;
    EXPECT_NE(result.err.find(expected), std::string::npos) << command << ": " << result.err;
  }
  WriteFile(dir_ + "/missing", "two words\n");
  const auto spaced = RunStreamcar({"check", "-c", path});
  EXPECT_EQ(spaced.exit_code, 2);
  EXPECT_NE(spaced.err.find("cannot be in a token"), std::string::npos) << spaced.err;
  EXPECT_EQ(spaced.err.find("two words"), std::string::npos) << "the token was quoted";
}

// Every request carries Streamcar-Signature over its exact body: json, raw, cloudevents, a batch
// (each through its own subscription of one sidecar) and the health check's GET (an empty body).
// The test recomputes each with OpenSSL's HMAC over the bytes the handler received, and checks
// that t is the sidecar's current Unix time.
TEST_F(HandlerAuthTest, SignatureCoversTheExactBodyOfEveryFormatBatchAndHealthCheck) {
  const std::string secret = "whsec-e2e-0123456789abcdef";
  SidecarConfig c;
  c.handler_url = handler_.url("/json");
  const std::string auth = "auth: { hmac_secret: \"${HMAC_SECRET}\" }";
  c.handler_extra = auth + ", health_url: \"" + handler_.url("/healthz") + "\"";
  const auto sub = [&](const std::string& stream, const std::string& handler) {
    return "  - stream: " + stream + "\n    group: billing\n    start: beginning\n" +
           "    handler: { url: \"" + handler_.url("/" + stream) + "\", " + auth + ", " + handler +
           " }\n";
  };
  c.subscription_extra =
      sub("raw", "format: raw") + sub("ce", "format: cloudevents") + sub("batch", "batch_size: 10");
  for (int n = 0; n < 5; ++n) Add({"n", std::to_string(n), "note", "h\xc3\xa9"}, "batch");
  auto sidecar = StartSidecar(c, {"HMAC_SECRET=" + secret});
  Add({"customer", "c-1", "note", "caf\xc3\xa9 \"quoted\""});
  Add({"data", std::string("\x00\x01\xffraw bytes", 13), "content_type", "application/x-raw"},
      "raw");
  Add({"type", "order.created", "data", "{\"a\":1}"}, "ce");
  std::set<std::string> seen;
  ASSERT_TRUE(handler_.WaitFor(
      [&](const std::vector<ReceivedRequest>& requests) {
        seen.clear();
        for (const auto& r : requests) seen.insert(r.path);
        return seen.size() == 5;
      },
      seconds(15)))
      << sidecar->Logs();
  const int64_t now = UnixSeconds();
  for (const auto& r : handler_.Requests()) {
    const std::string header = r.Header("streamcar-signature");
    ASSERT_TRUE(header.starts_with("t=")) << r.path << ": " << header;
    const std::string t = header.substr(2, header.find(',') - 2);
    EXPECT_LE(std::abs(now - std::stoll(t)), 5) << r.path << ": t is not the current time";
    EXPECT_EQ(header, ExpectedSignature(secret, t, r.body)) << r.method << " " << r.path;
    if (r.path == "/healthz") {
      EXPECT_EQ(r.method, "GET");
    }
  }
  // The raw body is the entry's bytes exactly, NUL and 0xff included.
  for (const auto& r : handler_.Requests()) {
    if (r.path == "/raw") {
      EXPECT_EQ(r.body, std::string("\x00\x01\xffraw bytes", 13));
    }
  }
  EXPECT_EQ(sidecar->Logs().find(secret), std::string::npos);
  EXPECT_EQ(Metrics().find(secret), std::string::npos);
}

class UnixSocketTest : public E2eTest {
 protected:
  std::string dir_ = MakeTempDir("streamcar-sock-");
  ~UnixSocketTest() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
};

// The handler listens on a Unix socket only. The url's host names nothing reachable (no DNS, no
// TCP): every request goes over the socket with the url's path and Host header, the health check
// included. Before the socket exists the handler is down (not an attempt: nothing is
// dead-lettered and the entry's first delivery says attempt 1).
TEST_F(UnixSocketTest, DeliversAndProbesOverTheSocketWithTheUrlsPathAndHost) {
  const std::string socket = dir_ + "/http.sock";
  SidecarConfig c;
  c.handler_url = "http://app.invalid:9/orders?from=socket";
  c.handler_extra = "unix_socket: \"" + socket + "\", health_url: \"http://app.invalid/healthz\"";
  auto sidecar = StartSidecar(c);
  const std::string id = Add({"k", "v"});
  // No socket yet: refused connects pause delivery; a few seconds pass without an attempt.
  ASSERT_TRUE(Eventually([&] { return Metric("streamcar_handler_up") == 0; }, seconds(10)))
      << sidecar->Logs();
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(Len("orders:dlq"), 0);

  TestHandler on_socket(socket);
  ASSERT_TRUE(on_socket.WaitFor(
      [&](const std::vector<ReceivedRequest>& requests) {
        return std::any_of(requests.begin(), requests.end(),
                           [&](const ReceivedRequest& r) { return r.method == "POST"; });
      },
      seconds(15)))
      << sidecar->Logs();
  bool probed = false;
  for (const auto& r : on_socket.Requests()) {
    EXPECT_EQ(r.Header("host"), r.method == "GET" ? "app.invalid" : "app.invalid:9");
    if (r.method == "GET") {
      EXPECT_EQ(r.path, "/healthz");
      probed = true;
      continue;
    }
    EXPECT_EQ(r.path, "/orders");
    EXPECT_EQ(r.Header("streamcar-id"), id);
    EXPECT_EQ(r.Header("streamcar-attempts"), "1");
  }
  EXPECT_TRUE(probed) << "the health check did not come over the socket";
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10)));
  EXPECT_EQ(handler_.Count(), 0u) << "nothing goes over TCP";
}

class RoutesTest : public E2eTest {};

// Two subscriptions, one entry per request and batches of 10, with the same routes: type
// order.created to /created, any other order.* to /orders, heartbeat dropped, the rest to
// handler.url (/all). Every entry is delivered once to its route's path (a batch never mixes
// paths), the dropped ones never, nothing stays pending, and the routed and filtered series
// count them.
TEST_F(RoutesTest, EntriesGoToTheirRouteAndDropsAreAcknowledgedUndelivered) {
  const std::string routes =
      "    routes:\n"
      "      - { field: type, equals: order.created, url: \"" +
      handler_.url("/created") + "\" }\n" + "      - { field: type, prefix: order., url: \"" +
      handler_.url("/orders") + "\" }\n" +
      "      - { field: type, equals: heartbeat, drop: true }\n";
  SidecarConfig c;
  c.handler_url = handler_.url("/all");
  c.subscription_extra =
      routes + "  - stream: batched\n    group: billing\n    start: beginning\n" +
      "    handler: { url: \"" + handler_.url("/all") + "\", batch_size: 10 }\n" + routes;
  // The route each entry must take, by "<stream>/<id>" (two streams may give the same id);
  // preloaded, so that the batches mix them.
  std::map<std::string, std::string> expected;
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"order.created", "/created"}, {"order.paid", "/orders"},     {"heartbeat", ""},
      {"invoice", "/all"},           {"order.created", "/created"}, {"heartbeat", ""}};
  size_t delivered = 0;
  for (const std::string stream : {"orders", "batched"}) {
    for (const auto& [type, path] : kinds) {
      expected[stream + "/" + Add({"type", type}, stream)] = path;
      if (!path.empty()) ++delivered;
    }
  }
  // No type field, and a binary one: neither matches a route.
  expected["orders/" + Add({"other", "order.created"})] = "/all";
  expected["orders/" + Add({"type", std::string("order.\xff")})] = "/all";
  delivered += 2;
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(Eventually(
      [&] {
        size_t n = 0;  // entries delivered: one per request, or one "attempts" per batch item
        for (const auto& r : handler_.Requests()) {
          if (!r.Header("streamcar-id").empty()) {
            ++n;
            continue;
          }
          for (size_t at = 0; (at = r.body.find("\"attempts\":", at)) != std::string::npos; ++at) {
            ++n;
          }
        }
        return n >= delivered && PendingCount() == 0 && PendingCount("batched") == 0;
      },
      seconds(15)))
      << sidecar->Logs();
  std::map<std::string, std::vector<std::string>> arrived;  // "<stream>/<id>" -> paths
  size_t batches = 0;
  for (const auto& r : handler_.Requests()) {
    if (!r.Header("streamcar-id").empty()) {
      arrived[r.Header("idempotency-key")].push_back(r.path);
      continue;
    }
    ++batches;  // only the stream "batched" is delivered in batches
    for (const auto& [key, path] : expected) {
      if (!key.starts_with("batched/")) continue;
      if (r.body.find("\"id\":\"" + key.substr(8) + "\"") != std::string::npos) {
        arrived[key].push_back(r.path);
      }
    }
  }
  EXPECT_GE(batches, 3u) << "one batch per path";
  for (const auto& [id, path] : expected) {
    if (path.empty()) {
      EXPECT_EQ(arrived.count(id), 0u) << id << " was dropped, yet delivered";
    } else {
      EXPECT_EQ(arrived[id], std::vector<std::string>{path}) << id;
    }
  }
  EXPECT_EQ(Len("orders:dlq") + Len("batched:dlq"), 0);
  const std::string metrics = Metrics();
  const auto series = [&](const std::string& sub, const std::string& name,
                          const std::string& route) {
    std::vector<std::string> labels = {"subscription=\"" + sub + "\""};
    if (!route.empty()) labels.push_back("route=\"" + route + "\"");
    return MetricValue(metrics, name, labels);
  };
  for (const std::string sub : {"orders/billing", "batched/billing"}) {
    EXPECT_EQ(series(sub, "streamcar_filtered_total", ""), 2) << sub;
    EXPECT_EQ(series(sub, "streamcar_routed_total", "0"), 2) << sub;
    EXPECT_EQ(series(sub, "streamcar_routed_total", "1"), 1) << sub;
    EXPECT_EQ(series(sub, "streamcar_routed_total", "2"), -1) << "a drop route has no series";
  }
  EXPECT_EQ(series("orders/billing", "streamcar_routed_total", "default"), 3);
  EXPECT_EQ(series("batched/billing", "streamcar_routed_total", "default"), 1);
}

// SPEC 3.2: a refused connection is no attempt. streamcar_routed_total counts attempts, where
// streamcar_deliveries_total does: the handler comes up two seconds after the sidecar, and the
// refused tries meanwhile (each entry handed back and sent again) count in neither, so each of
// the three entries is counted once, on its route. Counted at each send, they made route "0" 3
// and "default" 6 in the run.
TEST_F(RoutesTest, RoutedCountsAttemptsNotRefusedConnections) {
  const int port = FreePort();
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  SidecarConfig c;
  c.handler_url = base + "/all";
  c.subscription_extra =
      "    routes:\n      - { field: type, equals: a, url: \"" + base + "/a\" }\n";
  Add({"type", "a"});
  Add({"type", "b"});
  Add({"type", "a"});
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(Eventually([&] { return Metric("streamcar_handler_up") == 0; }, seconds(10)))
      << sidecar->Logs();
  std::this_thread::sleep_for(milliseconds(2000));  // refused connects, tried again and again
  TestHandler late(port);
  ASSERT_TRUE(
      WaitMetric("streamcar_deliveries_total", {"outcome=\"success\""}, 3, milliseconds(15000)))
      << sidecar->Logs();
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10)));
  EXPECT_EQ(late.Count(), 3u);
  EXPECT_EQ(Metric("streamcar_deliveries_total", {"outcome=\"success\""}), 3);
  EXPECT_EQ(Metric("streamcar_routed_total", {"route=\"0\""}), 2);
  EXPECT_EQ(Metric("streamcar_routed_total", {"route=\"default\""}), 1);
}

// `check` refuses a bad route naming it by its index.
TEST_F(RoutesTest, CheckNamesTheBadRoute) {
  SidecarConfig c;
  c.subscription_extra =
      "    routes:\n      - { field: type, equals: a, url: \"http://127.0.0.1:1/a\" }\n"
      "      - { field: type, prefix: b, drop: true }\n"
      "      - { field: type, equals: c, url: \"ftp://127.0.0.1/c\" }\n";
  const auto result = RunStreamcar({"check", "-c", WriteConfig(c)});
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_NE(result.err.find("subscriptions[0].routes[2].url: must be an http:// or https:// URL "
                            "(got \"ftp://127.0.0.1/c\")"),
            std::string::npos)
      << result.err;
}

}  // namespace
}  // namespace streamcar::testing
