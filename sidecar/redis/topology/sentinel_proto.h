#pragma once
// The few Sentinel replies a client reads (the sentinel-clients protocol): where the master is,
// whether a node is the master, and the +switch-master announcement of a failover.

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "sidecar/keys/node_address.h"
#include "sidecar/redis/reply.h"

namespace streamcar::redis {

// SENTINEL GET-MASTER-ADDR-BY-NAME: [ip, port] (the port a bulk string). nullopt for nil (the
// sentinel does not monitor that name), an error, or anything malformed: ask the next sentinel.
std::optional<keys::NodeAddress> ParseMasterAddr(const ReplyView& reply);

// ROLE: whether the node says "master" (a replica says "slave", a sentinel "sentinel").
bool RoleIsMaster(const ReplyView& role_reply);

// A +switch-master message: "<name> <old-ip> <old-port> <new-ip> <new-port>" -> the name and the
// new master's address. nullopt when malformed.
std::optional<std::pair<std::string, keys::NodeAddress>> ParseSwitchMaster(
    std::string_view payload);

}  // namespace streamcar::redis
