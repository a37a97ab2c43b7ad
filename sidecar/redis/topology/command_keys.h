#pragma once
// Which key a command we send names first, so that a routed Session (cluster mode) can send it
// to the master of that key's slot. Only the commands streamcar sends are known (the table is in
// command_keys.cc); any other command counts as keyless: it goes to some master and, if it did
// name a key there, the node's -MOVED sends it on (one extra round trip, never a wrong answer).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/redis/reply.h"

namespace streamcar::redis {

// The arguments of `command` as sent, the name first (decoded from its RESP encoding).
std::vector<std::string> ArgumentsOf(const Command& command);

// The first key of `command`, or nullopt for a keyless command (PING, INFO, SCRIPT, CLIENT,
// COMMAND, PUBLISH ...), an EVAL with no keys, an XREAD without STREAMS.
std::optional<std::string> FirstKeyOf(const Command& command);
// The same, from the decoded arguments.
std::optional<std::string_view> FirstKeyOf(const std::vector<std::string>& args);

// The slot of FirstKeyOf(command), or -1 when it has no key.
int SlotOf(const Command& command);

}  // namespace streamcar::redis
