#include "sidecar/redis/topology/slot_map.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

namespace streamcar::redis {
namespace {

Status Malformed(std::string_view command, std::string what) {
  return Status(StatusCode::kProtocol, std::string(command) + " reply: " + std::move(what));
}

// The value of `key` in a RESP2 flat map [k1, v1, k2, v2, ...]; nil view when absent.
ReplyView Field(const ReplyView& map, std::string_view key) {
  for (size_t i = 0; i + 1 < map.Size(); i += 2) {
    if (map[i].IsString() && map[i].Str() == key) return map[i + 1];
  }
  return ReplyView(nullptr);
}

// The host to connect to for an announced endpoint (see FromShards): nullopt when none is usable.
std::optional<std::string> HostOf(const ReplyView& endpoint, std::string_view ip,
                                  const keys::NodeAddress& asked) {
  if (endpoint.IsNil() || endpoint.Str().empty()) return asked.host;
  if (endpoint.Str() == "?") {
    if (ip.empty() || ip == "?") return std::nullopt;
    return std::string(ip);
  }
  return std::string(endpoint.Str());
}

bool ValidPort(int64_t port) { return port >= 1 && port <= 65535; }

// A shard's "slots": [first, last, first, last, ...] (integers in 7.0; strings accepted too).
StatusOr<std::vector<SlotRange>> ParseRanges(const ReplyView& slots) {
  if (!slots.IsArray() || slots.Size() % 2 != 0) {
    return Malformed("CLUSTER SHARDS", "\"slots\" is not a list of pairs");
  }
  std::vector<SlotRange> ranges;
  for (size_t i = 0; i < slots.Size(); i += 2) {
    int64_t bounds[2] = {-1, -1};
    for (size_t j = 0; j < 2; ++j) {
      const ReplyView bound = slots[i + j];
      if (bound.IsInteger()) {
        bounds[j] = bound.Integer();
      } else if (bound.IsString() && !bound.Str().empty() && bound.Str().size() <= 5) {
        int64_t value = 0;
        for (char c : bound.Str()) {
          value = (c >= '0' && c <= '9') ? value * 10 + (c - '0') : -1;
          if (value < 0) break;
        }
        bounds[j] = value;
      }
    }
    if (bounds[0] < 0 || bounds[1] < bounds[0] || bounds[1] >= keys::kClusterSlots) {
      return Malformed("CLUSTER SHARDS", "slot range " + std::to_string(bounds[0]) + "-" +
                                             std::to_string(bounds[1]) + " is not within 0-16383");
    }
    ranges.push_back({static_cast<int>(bounds[0]), static_cast<int>(bounds[1])});
  }
  return ranges;
}

// Two nodes are the same when both ids are known and equal, else when their addresses are.
bool SameNode(const ClusterNode& a, const ClusterNode& b) {
  if (!a.id.empty() && !b.id.empty()) return a.id == b.id;
  return a.address == b.address;
}

}  // namespace

Status SlotMap::AddShard(Shard shard) {
  if (shards_.size() >= static_cast<size_t>(std::numeric_limits<int16_t>::max())) {
    return Status(StatusCode::kProtocol, "the cluster lists more shards than a map can hold");
  }
  const auto index = static_cast<int16_t>(shards_.size());
  for (const SlotRange& range : shard.slots) {
    for (int slot = range.first; slot <= range.last; ++slot) {
      if (owner_[slot] != -1) {
        return Status(StatusCode::kProtocol,
                      "slot " + std::to_string(slot) + " is claimed by two shards");
      }
      owner_[slot] = index;
    }
  }
  shards_.push_back(std::move(shard));
  return Status::Ok();
}

StatusOr<SlotMap> SlotMap::FromShards(const ReplyView& reply, const keys::NodeAddress& asked,
                                      bool tls) {
  if (!reply.IsArray()) return Malformed("CLUSTER SHARDS", "not a list of shards");
  SlotMap map;
  for (size_t s = 0; s < reply.Size(); ++s) {
    const ReplyView shard_reply = reply[s];
    if (!shard_reply.IsArray()) return Malformed("CLUSTER SHARDS", "a shard is not a map");
    auto ranges = ParseRanges(Field(shard_reply, "slots"));
    if (!ranges.ok()) return ranges.status();
    const ReplyView nodes = Field(shard_reply, "nodes");
    if (!nodes.IsArray()) return Malformed("CLUSTER SHARDS", "a shard has no \"nodes\" list");
    std::vector<ClusterNode> masters;
    Shard shard;
    shard.slots = std::move(*ranges);
    for (size_t n = 0; n < nodes.Size(); ++n) {
      const ReplyView node_reply = nodes[n];
      if (!node_reply.IsArray()) return Malformed("CLUSTER SHARDS", "a node is not a map");
      ClusterNode node;
      node.id = std::string(Field(node_reply, "id").Str());
      const ReplyView port = Field(node_reply, tls ? "tls-port" : "port");
      if (!port.IsInteger() || !ValidPort(port.Integer())) {
        if (tls) {
          return Malformed("CLUSTER SHARDS",
                           "node " + node.id +
                               " lists no tls-port (a TLS client needs tls-cluster yes on every "
                               "node)");
        }
        return Malformed("CLUSTER SHARDS", "node " + node.id + " lists no port");
      }
      node.address.port = static_cast<int>(port.Integer());
      const auto host = HostOf(Field(node_reply, "endpoint"), Field(node_reply, "ip").Str(), asked);
      node.address.host = host.value_or("?");
      // 7.0 always says; should a server not, only the endpoint decides.
      const ReplyView health = Field(node_reply, "health");
      node.healthy = host.has_value() && (health.IsNil() || health.Str() == "online");
      node.failed = !health.IsNil() && health.Str() == "fail";
      if (Field(node_reply, "role").Str() == "master") {
        masters.push_back(std::move(node));
      } else {
        shard.replicas.push_back(std::move(node));
      }
    }
    // One master per shard; should a shard list two (the failed old one first, as in
    // redis/redis#13414), the healthy one serves and the other is listed with the replicas.
    std::stable_partition(masters.begin(), masters.end(),
                          [](const ClusterNode& node) { return node.healthy; });
    if (masters.empty()) {
      // No master: nothing served, but its nodes stay candidates for the next read.
      shard.slots.clear();
      if (shard.replicas.empty()) continue;
      shard.master = shard.replicas.front();
      shard.master.healthy = false;
      shard.replicas.erase(shard.replicas.begin());
    } else {
      shard.master = std::move(masters.front());
      for (size_t i = 1; i < masters.size(); ++i) shard.replicas.push_back(std::move(masters[i]));
    }
    if (Status added = map.AddShard(std::move(shard)); !added.ok()) return added;
  }
  return map;
}

StatusOr<SlotMap> SlotMap::FromSlots(const ReplyView& reply, const keys::NodeAddress& asked) {
  if (!reply.IsArray()) return Malformed("CLUSTER SLOTS", "not a list of slot ranges");
  // Ranges grouped by master, in the order masters first appear.
  std::vector<Shard> shards;
  for (size_t r = 0; r < reply.Size(); ++r) {
    const ReplyView entry = reply[r];
    if (!entry.IsArray() || entry.Size() < 3 || !entry[0].IsInteger() || !entry[1].IsInteger()) {
      return Malformed("CLUSTER SLOTS", "an entry is not [first, last, master, replicas...]");
    }
    const int64_t first = entry[0].Integer();
    const int64_t last = entry[1].Integer();
    if (first < 0 || last < first || last >= keys::kClusterSlots) {
      return Malformed("CLUSTER SLOTS", "slot range " + std::to_string(first) + "-" +
                                            std::to_string(last) + " is not within 0-16383");
    }
    std::vector<ClusterNode> nodes;
    for (size_t n = 2; n < entry.Size(); ++n) {
      const ReplyView node_reply = entry[n];
      if (!node_reply.IsArray() || node_reply.Size() < 2 || !node_reply[1].IsInteger() ||
          !ValidPort(node_reply[1].Integer())) {
        return Malformed("CLUSTER SLOTS", "a node is not [endpoint, port, id, ...]");
      }
      ClusterNode node;
      node.id = std::string(node_reply[2].Str());
      node.address.port = static_cast<int>(node_reply[1].Integer());
      // 7.0+: a 4th element, a flat map of other names ("ip", "hostname").
      const auto host = HostOf(node_reply[0], Field(node_reply[3], "ip").Str(), asked);
      node.address.host = host.value_or("?");
      node.healthy = host.has_value();
      nodes.push_back(std::move(node));
    }
    auto same_master = [&](const Shard& shard) { return SameNode(shard.master, nodes.front()); };
    auto shard = std::find_if(shards.begin(), shards.end(), same_master);
    if (shard == shards.end()) {
      shards.emplace_back();
      shard = std::prev(shards.end());
      shard->master = nodes.front();
      shard->replicas.assign(nodes.begin() + 1, nodes.end());
    }
    shard->slots.push_back({static_cast<int>(first), static_cast<int>(last)});
  }
  SlotMap map;
  for (Shard& shard : shards) {
    if (Status added = map.AddShard(std::move(shard)); !added.ok()) {
      return Malformed("CLUSTER SLOTS", added.message());
    }
  }
  return map;
}

const Shard* SlotMap::ShardOf(int slot) const {
  if (slot < 0 || slot >= keys::kClusterSlots || owner_[slot] < 0) return nullptr;
  return &shards_[owner_[slot]];
}

bool SlotMap::Serves(std::span<const int> used) const {
  return std::all_of(used.begin(), used.end(), [this](int slot) {
    const Shard* shard = ShardOf(slot);
    return shard != nullptr && shard->master.healthy;
  });
}

std::optional<int> SlotMap::LiveReplicasOf(int slot) const {
  const Shard* shard = ShardOf(slot);
  if (shard == nullptr || !shard->replicas_known) return std::nullopt;
  return static_cast<int>(std::count_if(shard->replicas.begin(), shard->replicas.end(),
                                        [](const ClusterNode& node) { return !node.failed; }));
}

void SlotMap::LearnMoved(int slot, const keys::NodeAddress& to) {
  if (slot < 0 || slot >= keys::kClusterSlots) return;
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (shards_[i].master.address == to) {
      owner_[slot] = static_cast<int16_t>(i);
      return;
    }
  }
  if (shards_.size() >= static_cast<size_t>(std::numeric_limits<int16_t>::max())) return;
  // A master this map does not know (a promoted replica, a new node): its id and replicas come
  // with the next read.
  Shard shard;
  shard.master.address = to;
  shard.replicas_known = false;
  owner_[slot] = static_cast<int16_t>(shards_.size());
  shards_.push_back(std::move(shard));
}

std::vector<keys::NodeAddress> SlotMap::Masters() const {
  std::vector<bool> serving(shards_.size(), false);
  for (int16_t owner : owner_) {
    if (owner >= 0) serving[owner] = true;
  }
  std::vector<keys::NodeAddress> masters;
  for (size_t i = 0; i < shards_.size(); ++i) {
    const keys::NodeAddress& address = shards_[i].master.address;
    if (serving[i] && std::find(masters.begin(), masters.end(), address) == masters.end()) {
      masters.push_back(address);
    }
  }
  return masters;
}

std::vector<keys::NodeAddress> SlotMap::RefreshCandidates() const {
  std::vector<keys::NodeAddress> candidates;
  std::set<keys::NodeAddress> seen;
  auto add = [&](const ClusterNode& node) {
    if (node.address.host == "?" || node.address.port == 0) return;
    if (seen.insert(node.address).second) candidates.push_back(node.address);
  };
  const std::vector<keys::NodeAddress> masters = Masters();
  for (const Shard& shard : shards_) {
    const bool serving =
        std::find(masters.begin(), masters.end(), shard.master.address) != masters.end();
    if (serving && shard.master.healthy) add(shard.master);
  }
  for (const Shard& shard : shards_) {
    for (const ClusterNode& replica : shard.replicas) {
      if (replica.healthy) add(replica);
    }
  }
  for (const Shard& shard : shards_) {
    add(shard.master);
    for (const ClusterNode& replica : shard.replicas) add(replica);
  }
  return candidates;
}

bool SlotMap::IsFailover(int slot, const SlotMap& previous) const {
  const Shard* now = ShardOf(slot);
  const Shard* before = previous.ShardOf(slot);
  if (now == nullptr || before == nullptr || SameNode(now->master, before->master)) return false;
  return std::any_of(before->replicas.begin(), before->replicas.end(),
                     [&](const ClusterNode& replica) { return SameNode(replica, now->master); });
}

}  // namespace streamcar::redis
