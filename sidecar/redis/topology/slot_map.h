#pragma once
// Which master serves each of the 16384 slots of a Redis Cluster, read from CLUSTER SHARDS (7.0+)
// or CLUSTER SLOTS (every version), and corrected by -MOVED between two reads. Pure data: the
// topology service asks the nodes and decides which map to adopt.

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sidecar/common/status.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/keys/node_address.h"
#include "sidecar/redis/reply.h"

namespace streamcar::redis {

struct SlotRange {
  int first = 0;
  int last = 0;  // inclusive
};

struct ClusterNode {
  std::string id;  // the 40-hex node id; empty when learned from a -MOVED
  keys::NodeAddress address;
  // A usable address and, in SHARDS, health "online" (7.0.15 says "fail" for a failed node);
  // SLOTS lists no health.
  bool healthy = true;
  // SHARDS health "fail": the cluster agreed the node is down. A replica "loading" (syncing, or
  // one whose offset the asked node has not heard of yet: idle since it joined) is not.
  bool failed = false;
};

struct Shard {
  std::vector<SlotRange> slots;  // empty: the shard serves nothing (a failed, replaced master)
  ClusterNode master;
  std::vector<ClusterNode> replicas;
  // False for a master learned from a -MOVED: its replicas come with the next read.
  bool replicas_known = true;
};

class SlotMap {
 public:
  SlotMap() { owner_.fill(-1); }

  // CLUSTER SHARDS, asked of `asked`. The port is "tls-port" for a TLS client (Redis lists it
  // only with tls-cluster yes: without it, an error that says so) else "port". The endpoint ""
  // (unknown-endpoint) means `asked`'s host; "?" (hostnames preferred, none set) the node's "ip",
  // and without one the node is not healthy. A shard whose master is not "online" is kept but
  // fails Serves(); a shard listed with no slots (a failed master after its failover, or
  // redis/redis#13414 on 7.2) serves nothing. A slot claimed twice is an error.
  static StatusOr<SlotMap> FromShards(const ReplyView& reply, const keys::NodeAddress& asked,
                                      bool tls);
  // CLUSTER SLOTS, asked of `asked`: ranges with their master first, then replicas; a master
  // with several ranges is one shard. Endpoint nil or "" means `asked`'s host, "?" the "ip" of
  // the node's metadata (7.0+).
  static StatusOr<SlotMap> FromSlots(const ReplyView& reply, const keys::NodeAddress& asked);

  // The shard serving `slot`; nullptr when unserved or out of range.
  const Shard* ShardOf(int slot) const;
  // The replicas of the master serving `slot` that the cluster has not marked failed (what may
  // confirm a WAIT, now or once synced); nullopt when the slot is unserved or its master's
  // replicas are not known (learned from a -MOVED, until the next read).
  std::optional<int> LiveReplicasOf(int slot) const;
  // Every slot of `used` has a healthy master: what a freshly read map must satisfy to be adopted.
  bool Serves(std::span<const int> used) const;
  // A -MOVED: `slot` is served by `to` from now on (until the next read replaces the map). `to`
  // must be a usable address (the router resolves "" and refreshes on "?").
  void LearnMoved(int slot, const keys::NodeAddress& to);
  // The masters serving at least one slot, each once, in shard order.
  std::vector<keys::NodeAddress> Masters() const;
  // Whom to ask for the next map: healthy masters with slots, then healthy replicas, then every
  // other node listed; each address once.
  std::vector<keys::NodeAddress> RefreshCandidates() const;
  // Whether `slot` changed hands by a failover (its new master was a replica of the old master)
  // rather than by a migration (another master) since `previous`. False when it did not change.
  bool IsFailover(int slot, const SlotMap& previous) const;

  const std::vector<Shard>& shards() const { return shards_; }

 private:
  // Index into shards_ of the shard serving each slot, -1 when unserved.
  std::array<int16_t, keys::kClusterSlots> owner_{};
  std::vector<Shard> shards_;

  Status AddShard(Shard shard);
};

}  // namespace streamcar::redis
