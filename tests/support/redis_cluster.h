#pragma once
// A real Redis Cluster for one test: `masters` masters splitting the 16384 slots evenly, each with
// `replicas_per_master` replicas, all on 127.0.0.1 with free ports (client and bus), killed at the
// end. Built with CLUSTER ADDSLOTSRANGE / MEET / REPLICATE rather than `redis-cli --cluster
// create`, so that node i < masters is master i and its replicas are known by construction (the
// tool picks the pairs itself) and 1 or 2 masters work too (the tool refuses fewer than 3).
//
// The helpers here talk to the nodes with plain blocking connections and follow redirections
// themselves: they are independent of the product's routing, which the tests check against them.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/redis/reply.h"
#include "tests/support/redis_server.h"

namespace streamcar::testing {

struct RedisClusterOptions {
  int masters = 3;
  int replicas_per_master = 1;
  std::string password;  // requirepass and masterauth on every node
  int node_timeout_ms = 1000;
  // Clients, the bus and replication over TLS: every node serves TLS only, on port(), with one
  // set of certificates (certificates()).
  bool tls = false;
  // An ACL user created on every node (all keys, channels and commands), for clients.
  std::string acl_user, acl_password;
};

class RedisCluster {
 public:
  // Starts the nodes and forms the cluster; returns once every node says cluster_state:ok, all
  // agree on the owner of every slot and every replica's link to its master is up. A cluster
  // that does not form fails the test (check HasFatalFailure()).
  explicit RedisCluster(RedisClusterOptions options = {});
  ~RedisCluster();

  int size() const { return static_cast<int>(nodes_.size()); }
  RedisServer& node(int i) { return *nodes_[i]; }
  const RedisServer& node(int i) const { return *nodes_[i]; }
  const std::string& NodeId(int i) const { return ids_[i]; }
  // The node listening on `port`, or -1.
  int IndexOfPort(int port) const;

  // With tls: the CA every node's certificate is signed by, and a client certificate.
  const TestCertificates& certificates() const { return certificates_; }
  // redis://127.0.0.1:<node 0>/0 (rediss:// with tls), for a configuration's redis.url.
  std::string SeedUrl() const;
  // The other nodes as a YAML flow sequence, for redis.nodes: ["127.0.0.1:p1", ...].
  std::string NodesYaml() const;

  // CLUSTER KEYSLOT, asked of a running node.
  int SlotOf(std::string_view key) const;
  // The node serving `slot` now, as a running node sees the cluster; -1 when none does.
  int MasterOfSlot(int slot) const;
  int MasterIndexOf(std::string_view key) const { return MasterOfSlot(SlotOf(key)); }
  // A node that replicates `master` now; -1 when none does.
  int ReplicaOf(int master) const;
  // `prefix` followed by the first number that puts the key on `master`.
  std::string KeyOnMaster(int master, std::string_view prefix) const;

  // Runs a command on the node serving `key`, following MOVED (remembered) and ASK (ASKING first,
  // once) and waiting out TRYAGAIN, CLUSTERDOWN and unreachable nodes for up to 10 s. Returns
  // the final reply, error or not. Cheap enough for a producer: key slots and slot owners are
  // cached and one connection per node is kept. One thread at a time; a command whose
  // connection fails is sent again (a write may then happen twice).
  redis::Reply Run(std::string_view key, const std::vector<std::string>& args);
  // Runs a command on node `i` on a fresh connection (with ASKING first if asked); an I/O error
  // fails the test, an error reply is returned.
  redis::Reply RunOn(int i, const std::vector<std::string>& args, bool asking = false) const;

  // CLUSTER FAILOVER on `replica`; returns once the cluster is healthy with it as a master.
  void ManualFailover(int replica);
  // kill -9 of `node` (no waiting for anything but the process).
  void Kill(int node) {
    nodes_[node]->Kill();
    if (node < static_cast<int>(paused_.size())) paused_[node] = false;
  }
  // Waits until a replica of `old_master` serves its slots and the cluster is healthy again;
  // returns that replica's index.
  int WaitForPromotion(int old_master, const std::vector<int>& slots_of_old_master);
  // Kill + WaitForPromotion.
  int KillMaster(int master);
  // Starts a killed node again (same port, same nodes.conf) and waits until the cluster is
  // healthy; a former master comes back as a replica of its successor.
  void Restart(int node);

  // SIGSTOP of `node`: a host that hangs without closing a connection. The helpers leave it
  // alone until Resume (SIGCONT), which waits until the cluster is healthy.
  void Pause(int node);
  void Resume(int node);
  // Running and not paused.
  bool Reachable(int node) const {
    return nodes_[node]->running() && (node >= static_cast<int>(paused_.size()) || !paused_[node]);
  }

  // Slot migration in steps, so that a test can act between them:
  // SETSLOT IMPORTING on `to`, then MIGRATING on `from`.
  void BeginMigration(int slot, int from, int to);
  // Moves every key of the slot with GETKEYSINSLOT + MIGRATE ... KEYS.
  void MoveKeys(int slot);
  // SETSLOT NODE on `to`, `from`, then the other masters; waits until every node agrees.
  void FinishMigration(int slot);

  // Waits (up to `seconds`) until every running node says cluster_state:ok and all agree on the
  // owner of every slot; fails the test otherwise.
  void WaitUntilHealthy(int seconds = 20);
  // The slots `master` serves, as a running node sees it.
  std::vector<int> SlotsOf(int master) const;

 private:
  struct Migration {
    int from, to;
  };
  // Starts the nodes and forms the cluster (the constructor's work: ASSERT needs a void function).
  void Form();
  // One command (ASKING first if asked) on Run's connection to node i, opened when missing;
  // nullopt (and the connection dropped) when the node cannot be reached or the connection fails.
  std::optional<redis::Reply> RunCached(int i, const std::vector<std::string>& args, bool asking);
  // Creates the ACL user of the options on node i (again after a restart: no ACL file).
  void CreateAclUser(int i);
  // The slot owners (node index, -1 for none) as node `viewer` sees them, or empty when the node
  // cannot be asked.
  std::vector<int> OwnersSeenBy(int viewer) const;
  // A running node to ask about the cluster.
  int AnyRunning() const;
  std::string ClusterInfoField(int node, std::string_view field) const;

  RedisClusterOptions options_;
  std::string certificates_dir_;
  TestCertificates certificates_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::vector<std::string> ids_;
  std::map<int, Migration> migrations_;
  std::vector<bool> paused_;
  // Run's caches: key -> slot, slot -> owner, and a connection per node.
  std::map<std::string, int, std::less<>> slot_of_key_;
  std::vector<int> owners_;
  std::vector<std::unique_ptr<redis::Connection>> connections_;
};

}  // namespace streamcar::testing
