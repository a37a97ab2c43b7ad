#pragma once
// Where the Redis node for a key is (SPEC 8): the one question every connection asks before it
// connects, whatever the deployment.
//   - standalone: the url's host and port, always;
//   - cluster: the master serving the key's slot, from CLUSTER SHARDS (or SLOTS) asked of the
//     known nodes and seeds, corrected at once by a -MOVED and read again at least once a minute;
//   - sentinel: the master the sentinels name (GET-MASTER-ADDR-BY-NAME, asked in order), confirmed
//     by ROLE, found again on a lost connection, a -READONLY, or a +switch-master message.
//   - auto: cluster when the url's node says cluster_enabled:1 (INFO cluster), else standalone;
//     decided on first use and never again.
//
// Thread-safe. The calls that may ask a server (Resolve, MasterFor) block for up to a few
// connect timeouts: call them off the event loops (connector threads, the CLI, the retention
// thread). The others never block.
//
// One Topology per process (app/run.cc, or one per CLI command), shared by every connection
// through ConnectionOptions::topology.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/keys/node_address.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/topology/reply_kind.h"
#include "sidecar/redis/topology/slot_map.h"

namespace streamcar::redis {

// The mode a deployment turned out to be (auto resolved).
enum class ResolvedMode { kStandalone, kCluster, kSentinel };
const char* ResolvedModeName(ResolvedMode mode);

// What the topology reports, for the metrics of SPEC 8. Called on any thread; must not block.
class TopologyObserver {
 public:
  virtual ~TopologyObserver() = default;
  virtual void OnRedirect(ReplyKind kind) = 0;   // kMoved or kAsk, each one followed
  virtual void OnFailover() = 0;                 // a used slot's master (or the sentinel master)
                                                 // changed to a replica of the old one
  virtual void OnMastersKnown(int masters) = 0;  // streamcar_redis_nodes
};

struct TopologyOptions {
  config::RedisMode mode = config::RedisMode::kStandalone;
  // How to reach and authenticate to every data node: the url's endpoint is the standalone node
  // and the first cluster seed; its scheme (TLS), database, credentials and timeouts apply to
  // every node. `data.topology` must be empty here.
  ConnectionOptions data;
  std::vector<keys::NodeAddress> seeds;  // cluster: redis.nodes (the url's host:port comes first)
  config::SentinelConfig sentinel;
  // The slots this process uses (its streams and dead-letter streams): a freshly read map is
  // adopted only when it serves all of them, and a change of their masters is a failover.
  std::vector<int> used_slots;
  Millis refresh_interval{60000};  // SPEC 8: "at least once a minute"
  const Clock* clock = &SystemClock::Instance();
};

// Builds options from a validated configuration: mode, seeds (url first, then redis.nodes),
// sentinel settings, the data nodes' connection options.
TopologyOptions TopologyOptionsOf(const config::Config& config);

class Topology {
 public:
  // `observer` may be null (nothing counted); else it must outlive the topology.
  Topology(TopologyOptions options, TopologyObserver* observer);
  ~Topology();  // stops the background thread
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  // Blocks until the mode and the first map (cluster) or master (sentinel) are known, or
  // `deadline` passes. kFatal when retrying cannot help (a database index other than 0 on a
  // cluster, every sentinel refusing our credentials, auto without the right to run INFO); else
  // the last error, retryable.
  Status Resolve(SteadyTime deadline);
  // The mode, once Resolve has succeeded (auto resolved); nullopt before.
  std::optional<ResolvedMode> mode() const;

  // The master for `slot` (-1: any master, for a command without a key). Uses what is known;
  // asks the servers (blocking) when nothing is known, or when the node was reported failed.
  StatusOr<keys::NodeAddress> MasterFor(int slot);
  // What is known now, never blocking; nullopt when no master is known (readiness: SPEC 8).
  std::optional<keys::NodeAddress> KnownMasterFor(int slot) const;
  // Cluster: the live replicas of `slot`'s master in the map now (not marked failed:
  // SlotMap::LiveReplicasOf), never blocking; nullopt in the other modes, while the map does not
  // know them, or when `master` does not serve `slot` in it (the count would be another node's: a
  // caller connected to `master` asks about the node it is connected to).
  std::optional<int> KnownReplicasFor(int slot, const keys::NodeAddress& master) const;
  // Bumps whenever the answer of MasterFor may have changed for some slot: a connection that
  // connected at an older version checks KnownMasterFor against its node before its next
  // command. Cheap: one atomic load.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }

  // A -MOVED was followed: learned at once (version bumps when it changes the owner), the whole
  // map read again soon (coalesced: at most every 250 ms).
  void OnMoved(const Redirect& redirect, const keys::NodeAddress& answered);
  // A -ASK was followed (counted; the map does not change).
  void OnAsk();
  // `node` failed us: a refused connect, a lost connection, -READONLY, -CLUSTERDOWN, a ROLE that
  // is not master, -UNBLOCKED by a role change. Cluster: read the map again soon; sentinel: ask
  // the sentinels again before the next MasterFor answers.
  void OnNodeFailed(const keys::NodeAddress& node, std::string_view why);

  // Starts the background thread (cluster: the periodic and requested map reads; sentinel: the
  // +switch-master subscription and the periodic check). Standalone: nothing to do. Call after
  // Resolve succeeded (before, or twice: nothing happens). Without it, a -MOVED still corrects
  // the map at once and a failed node still makes MasterFor ask again (the CLI needs no thread).
  void Start();
  // Joins the background thread within about a second (its waits are short or wakeable).
  void Stop();

  // The data nodes' connection options for `node` (no topology inside, database 0 in a cluster).
  ConnectionOptions OptionsFor(const keys::NodeAddress& node) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<uint64_t> version_{1};
};

}  // namespace streamcar::redis
