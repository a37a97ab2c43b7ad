#pragma once
// Shared pieces of the end-to-end tests: a real redis-server, a real HTTP handler, and the real
// binary started with a config the test writes.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/redis_server.h"
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
  std::string drain_timeout = "10s";
  int max_attempts = 3;
  std::string initial_backoff = "50ms";
  std::string min_idle = "60s";
  std::string claim_interval = "10s";
};

class E2eTest : public ::testing::Test {
 protected:
  E2eTest() : admin_port_(FreePort()) {}

  std::string Yaml(const SidecarConfig& c) const {
    std::string url = c.handler_url.empty() ? handler_.url("/") : c.handler_url;
    std::string yaml = "version: 1\nredis:\n  url: " + redis_->url() +
                       "\n  command_timeout: 2s\nconsumer:\n  name: " + c.consumer +
                       "\nadmin:\n  listen: 127.0.0.1:" + std::to_string(admin_port_) +
                       "\nshutdown:\n  drain_timeout: " + c.drain_timeout + "\n" + c.top_extra +
                       "subscriptions:\n  - stream: " + c.stream + "\n    group: " + c.group +
                       "\n    start: " + c.start + "\n    handler: { url: \"" + url + "\"" +
                       (c.handler_extra.empty() ? "" : ", " + c.handler_extra) +
                       " }\n    retry: { max_attempts: " + std::to_string(c.max_attempts) +
                       ", initial_backoff: " + c.initial_backoff +
                       ", max_backoff: 1s, jitter: 0 }\n" + "    claim: { min_idle: " + c.min_idle +
                       ", interval: " + c.claim_interval + " }\n" + c.subscription_extra;
    return yaml;
  }

  std::unique_ptr<SidecarProcess> StartSidecar(const SidecarConfig& c,
                                               const std::vector<std::string>& env = {}) {
    auto sidecar = std::make_unique<SidecarProcess>(Yaml(c), env);
    return sidecar;
  }

  // Waits for /readyz to answer 200.
  bool WaitReady(milliseconds timeout = milliseconds(10000)) {
    return Eventually([&] { return HttpGet(admin_port_, "/readyz").first == 200; }, timeout);
  }

  std::string Metrics() { return HttpGet(admin_port_, "/metrics").second; }
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

  int64_t PendingCount(const std::string& stream = "orders", const std::string& group = "billing") {
    auto reply = redis_->Run({"XPENDING", stream, group});
    return reply.view()[0].Integer();
  }

  int64_t Len(const std::string& stream) { return redis_->Run({"XLEN", stream}).view().Integer(); }

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
};

}  // namespace streamcar::testing
