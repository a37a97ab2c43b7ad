#pragma once
// The Redis deployments the guarantee suite (tests/e2e/guarantee_test.cc) runs against: a
// standalone server, a Redis Cluster (3 masters) and a Sentinel set (a master, a replica, one
// sentinel), each started once per test process and shared by its tests, which keep apart by
// using streams of their own. Whatever binary STREAMCAR_TEST_REDIS_SERVER names is started
// instead of redis-server (tests/support/redis_server.cc), so the same suite also runs on
// another server build.
//
// The helpers reach the master that serves a key directly (plain connections, no routing of the
// product's), from any thread: the handler asks Redis about an entry while its request is open.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sidecar/redis/reply.h"
#include "sidecar/redis/topology/topology.h"

namespace streamcar::testing {

enum class Topology { kStandalone, kCluster, kSentinel };

// "standalone", "cluster", "sentinel": the gtest parameter's name.
std::string TopologyName(Topology topology);

class GuaranteeTopology {
 public:
  virtual ~GuaranteeTopology() = default;

  // The deployment of `topology` for this process, started at the first call (a failure to
  // start fails the test: check HasFatalFailure()); Reset() stops them all.
  static GuaranteeTopology& Shared(Topology topology);
  static void Reset();

  // The body of a configuration's redis: block (each line indented 2 spaces, url included).
  virtual std::string RedisYaml() const = 0;
  // A stream name no other test of this process uses: `prefix` and a number; in a cluster, on a
  // master other than the seed node, so that routing is part of what is tested.
  virtual std::string NewStream(const std::string& prefix) = 0;
  // The port of the master serving `key`.
  virtual int MasterPort(const std::string& key) = 0;
  // The product's own view of the deployment (redis::Topology's options, as `run` would build
  // them from RedisYaml()), for in-process tests of the product's libraries.
  virtual redis::TopologyOptions ProductTopology() = 0;

  // The default dead-letter stream of `stream` (SPEC 3.3, 8): in a cluster in the stream's slot.
  std::string DeadLetterStream(const std::string& stream) const {
    return cluster_slots_ ? "{" + stream + "}:dlq" : stream + ":dlq";
  }
  // One command on the master serving `key`, on a fresh connection; an error reply is returned,
  // an I/O error fails the test and returns an empty reply. Thread-safe.
  redis::Reply Run(const std::string& key, const std::vector<std::string>& args);
  // Whether the server has XACKDEL (COMMAND INFO, as the product asks: DESIGN.md trap 6).
  bool HasAckDel(const std::string& key);

 protected:
  explicit GuaranteeTopology(bool cluster_slots) : cluster_slots_(cluster_slots) {}
  int next_stream_ = 0;

 private:
  const bool cluster_slots_;
};

}  // namespace streamcar::testing
