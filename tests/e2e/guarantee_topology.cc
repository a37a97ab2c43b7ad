#include "tests/e2e/guarantee_topology.h"

#include <gtest/gtest.h>

#include "sidecar/redis/connection.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_sentinel.h"
#include "tests/support/redis_server.h"

namespace streamcar::testing {
namespace {

class Standalone : public GuaranteeTopology {
 public:
  Standalone() : GuaranteeTopology(false) {}
  std::string RedisYaml() const override {
    return "  url: " + server_.url() + "\n  command_timeout: 2s\n";
  }
  std::string NewStream(const std::string& prefix) override {
    return prefix + std::to_string(next_stream_++);
  }
  int MasterPort(const std::string&) override { return server_.port(); }
  redis::TopologyOptions ProductTopology() override {
    redis::TopologyOptions options;
    options.data = server_.ClientOptions();
    return options;
  }

 private:
  RedisServer server_;
};

// Three masters without replicas: the suite tests the consumer on a sharded keyspace, not
// failover (tests/e2e/cluster_fault_test.cc does that), and CI's two cores are the budget.
class Cluster : public GuaranteeTopology {
 public:
  Cluster() : GuaranteeTopology(true), cluster_(RedisClusterOptions{.replicas_per_master = 0}) {}
  std::string RedisYaml() const override {
    return "  url: " + cluster_.SeedUrl() + "\n  mode: cluster\n  nodes: " + cluster_.NodesYaml() +
           "\n  command_timeout: 2s\n";
  }
  std::string NewStream(const std::string& prefix) override {
    // Masters 1 and 2 in turn: never the seed's.
    const int master = 1 + next_stream_ % 2;
    return cluster_.KeyOnMaster(master, prefix + std::to_string(next_stream_++) + "-");
  }
  int MasterPort(const std::string& key) override {
    std::lock_guard lock(mutex_);
    auto found = ports_.find(key);
    if (found == ports_.end()) {
      const int master = cluster_.MasterIndexOf(key);
      if (master < 0) return -1;
      found = ports_.emplace(key, cluster_.node(master).port()).first;
    }
    return found->second;
  }
  redis::TopologyOptions ProductTopology() override {
    redis::TopologyOptions options;
    options.mode = config::RedisMode::kCluster;
    options.data = cluster_.node(0).ClientOptions();
    for (int i = 1; i < cluster_.size(); ++i) {
      options.seeds.push_back({"127.0.0.1", cluster_.node(i).port()});
    }
    return options;
  }

 private:
  RedisCluster cluster_;
  std::mutex mutex_;
  std::map<std::string, int> ports_;  // no failover here: a key's master stays
};

// The sentinels are asked for the master (the url's host and port lead nowhere, as in
// tests/e2e/sentinel_test.cc). One sentinel is enough to discover; failover is sentinel_test's.
class Sentinel : public GuaranteeTopology {
 public:
  Sentinel() : GuaranteeTopology(false), set_(SentinelSetOptions{.sentinels = 1}) {}
  std::string RedisYaml() const override {
    return "  url: redis://127.0.0.1:1/0\n  mode: sentinel\n  command_timeout: 2s\n"
           "  sentinel:\n    master: " +
           set_.options().master_name + "\n    addresses: " + set_.AddressesYaml() + "\n";
  }
  std::string NewStream(const std::string& prefix) override {
    return prefix + std::to_string(next_stream_++);
  }
  int MasterPort(const std::string&) override {
    std::lock_guard lock(mutex_);
    if (port_ < 0) port_ = set_.MasterPort();
    return port_;
  }
  redis::TopologyOptions ProductTopology() override {
    redis::TopologyOptions options;
    options.mode = config::RedisMode::kSentinel;
    options.data.endpoint.host = "127.0.0.1";
    options.data.endpoint.port = 1;  // as the url says: unused, the sentinels name the master
    options.sentinel.master = set_.options().master_name;
    for (int i = 0; i < set_.sentinel_count(); ++i) {
      options.sentinel.addresses.push_back(set_.sentinel(i).address());
    }
    return options;
  }

 private:
  SentinelSet set_;
  std::mutex mutex_;
  int port_ = -1;
};

std::map<Topology, std::unique_ptr<GuaranteeTopology>>& Deployments() {
  static std::map<Topology, std::unique_ptr<GuaranteeTopology>> deployments;
  return deployments;
}

}  // namespace

std::string TopologyName(Topology topology) {
  switch (topology) {
    case Topology::kStandalone:
      return "standalone";
    case Topology::kCluster:
      return "cluster";
    case Topology::kSentinel:
      return "sentinel";
  }
  return "unknown";
}

GuaranteeTopology& GuaranteeTopology::Shared(Topology topology) {
  auto& slot = Deployments()[topology];
  if (slot == nullptr) {
    switch (topology) {
      case Topology::kStandalone:
        slot = std::make_unique<Standalone>();
        break;
      case Topology::kCluster:
        slot = std::make_unique<Cluster>();
        break;
      case Topology::kSentinel:
        slot = std::make_unique<Sentinel>();
        break;
    }
  }
  return *slot;
}

void GuaranteeTopology::Reset() { Deployments().clear(); }

redis::Reply GuaranteeTopology::Run(const std::string& key, const std::vector<std::string>& args) {
  redis::ConnectionOptions options;
  options.endpoint.host = "127.0.0.1";
  options.endpoint.port = MasterPort(key);
  auto connection = redis::Connection::Open(options);
  if (!connection.ok()) {
    ADD_FAILURE() << "cannot reach the master of " << key << ": " << connection.status().message();
    return {};
  }
  redis::Command command(args.front());
  for (size_t i = 1; i < args.size(); ++i) command.Arg(args[i]);
  auto replies = (*connection)->RunPipeline({command});
  if (!replies.ok()) {
    ADD_FAILURE() << args.front() << " on the master of " << key << ": "
                  << replies.status().message();
    return {};
  }
  return std::move((*replies)[0]);
}

bool GuaranteeTopology::HasAckDel(const std::string& key) {
  const redis::Reply info = Run(key, {"COMMAND", "INFO", "XACKDEL"});
  return info.view().IsArray() && info.view().Size() == 1 && !info.view()[0].IsNil();
}

}  // namespace streamcar::testing
