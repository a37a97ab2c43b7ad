#pragma once
// Shared pieces of the end-to-end tests: a real redis-server, a real HTTP handler, and the real
// binary started with a config the test writes. Helpers fail the test on a Redis error reply
// rather than read it as zero, and every sidecar is checked at teardown (sidecar_process.h).

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/redis_server.h"
#include "tests/support/sanitizer.h"
#include "tests/support/sidecar_process.h"
#include "tests/support/test_handler.h"

namespace streamcar::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct SidecarConfig {
  std::string consumer = "c1";
  std::string stream = "orders";
  std::string group = "billing";
  std::string start = "beginning";
  std::string handler_url;
  std::string handler_extra;       // more "handler:" keys, YAML flow items ("timeout: 1s, ...")
  std::string subscription_extra;  // more subscription keys, each line indented 4 spaces
  std::string top_extra;           // more top-level YAML
  std::string consumer_extra;      // more "consumer:" keys, each line indented 2 spaces
  std::string redis_url;           // "" : the test's redis-server
  std::string redis_extra;         // more "redis:" keys, each line indented 2 spaces
  std::optional<std::string> admin_listen;  // unset: 127.0.0.1:<admin port>
  int admin_port = 0;                       // 0: the fixture's admin_port_
  std::string drain_timeout = "10s";
  // redis.command_timeout (a sharded member's session must be at least three times it)
  std::string command_timeout = "2s";
  int max_attempts = 3;
  std::string initial_backoff = "50ms";
  std::string max_backoff = "1s";
  std::string min_idle = "60s";
  std::string claim_interval = "10s";
  int claim_count = 0;  // 0: the default
};

// One dead letter, as read back from the dead-letter stream.
struct DeadLetter {
  std::string id;                                           // its id in the DLQ
  std::vector<std::pair<std::string, std::string>> fields;  // every field, in order
  // The value of `name` (the first one), or "" when absent; Has() tells the two apart.
  std::string Get(const std::string& name) const {
    for (const auto& [k, v] : fields) {
      if (k == name) return v;
    }
    return {};
  }
  bool Has(const std::string& name) const {
    for (const auto& f : fields) {
      if (f.first == name) return true;
    }
    return false;
  }
};

class E2eTest : public ::testing::Test {
 protected:
  E2eTest() : admin_port_(FreePort()) {}
  ~E2eTest() override {
    std::error_code ignored;
    for (const auto& dir : temp_dirs_) std::filesystem::remove_all(dir, ignored);
  }

  std::string Yaml(const SidecarConfig& c) const {
    std::string url = c.handler_url.empty() ? handler_.url("/") : c.handler_url;
    const int admin_port = c.admin_port != 0 ? c.admin_port : admin_port_;
    const std::string listen =
        c.admin_listen ? "\"" + *c.admin_listen + "\"" : "127.0.0.1:" + std::to_string(admin_port);
    std::string yaml =
        "version: 1\nredis:\n  url: " + (c.redis_url.empty() ? redis_->url() : c.redis_url) +
        "\n  command_timeout: " + c.command_timeout + "\n" + c.redis_extra +
        "consumer:\n  name: " + c.consumer + "\n" + c.consumer_extra +
        "admin:\n  listen: " + listen + "\nshutdown:\n  drain_timeout: " + c.drain_timeout + "\n" +
        c.top_extra + "subscriptions:\n  - stream: " + c.stream + "\n    group: " + c.group +
        "\n    start: " + c.start + "\n    handler: { url: \"" + url + "\"" +
        (c.handler_extra.empty() ? "" : ", " + c.handler_extra) +
        " }\n    retry: { max_attempts: " + std::to_string(c.max_attempts) +
        ", initial_backoff: " + c.initial_backoff + ", max_backoff: " + c.max_backoff +
        ", jitter: 0 }\n" + "    claim: { min_idle: " + c.min_idle +
        ", interval: " + c.claim_interval +
        (c.claim_count > 0 ? ", count: " + std::to_string(c.claim_count) : "") + " }\n" +
        c.subscription_extra;
    return yaml;
  }

  // Starts a sidecar on c.admin_port (default: the fixture's admin_port_).
  std::unique_ptr<SidecarProcess> StartSidecar(const SidecarConfig& c,
                                               const std::vector<std::string>& env = {}) {
    return std::make_unique<SidecarProcess>(Yaml(c), env,
                                            c.admin_port != 0 ? c.admin_port : admin_port_);
  }
  // Another sidecar beside the first, with its own admin port (sidecar->admin_port()).
  std::unique_ptr<SidecarProcess> StartPeer(SidecarConfig c,
                                            const std::vector<std::string>& env = {}) {
    c.admin_port = FreePort();
    return StartSidecar(c, env);
  }

  // Writes `yaml` to a file that lives as long as the test; its path.
  std::string WriteConfig(const std::string& yaml) {
    temp_dirs_.push_back(MakeTempDir("streamcar-config-"));
    std::string path = temp_dirs_.back() + "/streamcar.yaml";
    std::ofstream(path) << yaml;
    return path;
  }
  std::string WriteConfig(const SidecarConfig& c) { return WriteConfig(Yaml(c)); }

  // Waits for /readyz to answer 200 (on `port`, default the fixture's admin port).
  bool WaitReady(milliseconds timeout = milliseconds(15000), int port = 0) {
    const int p = port != 0 ? port : admin_port_;
    return Eventually([&] { return HttpGet(p, "/readyz").first == 200; }, timeout);
  }

  std::string Metrics(int port = 0) {
    return HttpGet(port != 0 ? port : admin_port_, "/metrics").second;
  }
  double Metric(const std::string& name, const std::vector<std::string>& labels = {}) {
    return MetricValue(Metrics(), name, labels);
  }
  bool WaitMetric(const std::string& name, const std::vector<std::string>& labels, double at_least,
                  milliseconds timeout = milliseconds(15000)) {
    return Eventually([&] { return Metric(name, labels) >= at_least; }, timeout);
  }

  std::string Add(std::vector<std::string> fields, const std::string& stream = "orders") {
    std::vector<std::string> args = {"XADD", stream, "*"};
    args.insert(args.end(), fields.begin(), fields.end());
    return std::string(redis_->Run(args).view().Str());
  }

  // The group's pending count. A missing group or stream (NOGROUP) reads as -1, never as
  // "nothing pending": a wait for 0 keeps waiting (the sidecar may not have created the group
  // yet) and an EXPECT_EQ with a count fails.
  int64_t PendingCount(const std::string& stream = "orders", const std::string& group = "billing") {
    auto reply = redis_->RunAllowingError({"XPENDING", stream, group});
    if (reply.IsError() || !reply.view().IsArray() || reply.view().Size() == 0) return -1;
    return reply.view()[0].Integer();
  }

  // XLEN (0 for a missing key, as Redis says); an error reply fails the test and reads as -1.
  int64_t Len(const std::string& stream) {
    auto reply = redis_->Run({"XLEN", stream});
    return reply.view().IsInteger() ? reply.view().Integer() : -1;
  }

  // Every dead letter of `stream`, oldest first.
  std::vector<DeadLetter> DeadLetters(const std::string& stream = "orders:dlq") {
    std::vector<DeadLetter> out;
    auto reply = redis_->Run({"XRANGE", stream, "-", "+"});
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      DeadLetter letter;
      letter.id = reply.view()[i][0].Str();
      auto fields = reply.view()[i][1];
      for (size_t k = 0; k + 1 < fields.Size(); k += 2)
        letter.fields.emplace_back(fields[k].Str(), fields[k + 1].Str());
      out.push_back(std::move(letter));
    }
    return out;
  }

  // Requests the handler received for entry `id`, in order.
  std::vector<ReceivedRequest> RequestsFor(const std::string& id) {
    std::vector<ReceivedRequest> out;
    for (auto& r : handler_.Requests()) {
      if (r.Header("streamcar-id") == id) out.push_back(r);
    }
    return out;
  }

  std::unique_ptr<RedisServer> redis_ = std::make_unique<RedisServer>();
  TestHandler handler_;
  int admin_port_;

 private:
  std::vector<std::string> temp_dirs_;
};

}  // namespace streamcar::testing
