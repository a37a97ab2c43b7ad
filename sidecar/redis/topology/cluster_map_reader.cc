#include "sidecar/redis/topology/cluster_map_reader.h"

#include <string>

namespace streamcar::redis {
namespace {

// The first used slot `map` does not serve with a healthy master, for the error message.
int FirstUnserved(const SlotMap& map, std::span<const int> used_slots) {
  for (int slot : used_slots) {
    if (!map.Serves(std::span<const int>(&slot, 1))) return slot;
  }
  return -1;
}

}  // namespace

StatusOr<SlotMap> ReadMapFrom(Connection& connection, const keys::NodeAddress& node, bool tls,
                              std::span<const int> used_slots) {
  Status shards_problem = Status::Ok();
  auto shards = connection.Run(Command("CLUSTER").Arg("SHARDS"));
  if (shards.ok()) {
    auto map = SlotMap::FromShards(shards->view(), node, tls);
    if (map.ok() && map->Serves(used_slots)) return map;
    shards_problem =
        map.ok() ? Status(StatusCode::kIo, "CLUSTER SHARDS of " + node.Describe() +
                                               " names no healthy master for slot " +
                                               std::to_string(FirstUnserved(*map, used_slots)))
                 : map.status();
  } else if (shards.status().code() != StatusCode::kServerError) {
    return shards.status();  // the connection is gone: SLOTS cannot be asked either
  }
  // "ERR unknown subcommand 'SHARDS'" (before 7.0), or a SHARDS map we cannot use.
  auto slots = connection.Run(Command("CLUSTER").Arg("SLOTS"));
  if (!slots.ok()) {
    if (slots.status().IsServerError("NOPERM")) {
      return Status(StatusCode::kFatal, "the ACL user may not run CLUSTER SLOTS/SHARDS on " +
                                            node.Describe() + ": " + slots.status().message());
    }
    return slots.status();
  }
  auto map = SlotMap::FromSlots(slots->view(), node);
  if (!map.ok()) return map.status();
  if (!map->Serves(used_slots)) {
    return Status(StatusCode::kIo,
                  "the cluster map of " + node.Describe() + " names no healthy master for slot " +
                      std::to_string(FirstUnserved(*map, used_slots)) +
                      (shards_problem.ok() ? "" : " (" + shards_problem.message() + ")"));
  }
  return map;
}

StatusOr<ClusterMapRead> ReadClusterMap(
    const std::vector<keys::NodeAddress>& candidates,
    const std::function<ConnectionOptions(const keys::NodeAddress&)>& options_for,
    std::span<const int> used_slots, const std::function<bool()>& cancelled) {
  Status last(StatusCode::kIo, "no cluster node to ask for the slot map");
  bool all_fatal = !candidates.empty();
  for (const keys::NodeAddress& node : candidates) {
    if (cancelled && cancelled()) return Status(StatusCode::kCancelled, "topology stopping");
    const ConnectionOptions options = options_for(node);
    auto connection = Connection::Open(options);
    if (!connection.ok()) {
      last = Status(connection.status().code(),
                    "cluster node " + node.Describe() + ": " + connection.status().message());
      all_fatal = all_fatal && connection.status().code() == StatusCode::kFatal;
      continue;
    }
    const bool tls = options.endpoint.kind == config::RedisEndpoint::Kind::kTls;
    auto map = ReadMapFrom(**connection, node, tls, used_slots);
    if (map.ok()) return ClusterMapRead{std::move(*map), node};
    last = Status(map.status().code(),
                  "cluster node " + node.Describe() + ": " + map.status().message());
    all_fatal = all_fatal && map.status().code() == StatusCode::kFatal;
  }
  if (!all_fatal && last.code() == StatusCode::kFatal) {
    // Some node refused, another was merely unreachable: a retry may find a usable one.
    return Status(StatusCode::kIo, last.message());
  }
  return last;
}

}  // namespace streamcar::redis
