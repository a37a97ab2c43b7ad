#include "sidecar/redis/topology/sentinel_proto.h"

#include <vector>

namespace streamcar::redis {
namespace {

// "<host>" and "<port>" as one address, the port 1-65535; nullopt without a usable host.
std::optional<keys::NodeAddress> AddressOf(std::string_view host, std::string_view port) {
  if (host.empty() || host == "?" || host.find(' ') != std::string_view::npos) return std::nullopt;
  std::string joined(host);
  joined.append(":").append(port);
  auto address = keys::ParseRedirectEndpoint(joined);
  if (!address || address->host != host) return std::nullopt;
  return address;
}

}  // namespace

std::optional<keys::NodeAddress> ParseMasterAddr(const ReplyView& reply) {
  if (!reply.IsArray() || reply.Size() != 2 || !reply[0].IsString()) return std::nullopt;
  const ReplyView port = reply[1];
  if (port.IsInteger()) return AddressOf(reply[0].Str(), std::to_string(port.Integer()));
  if (!port.IsString()) return std::nullopt;
  return AddressOf(reply[0].Str(), port.Str());
}

bool RoleIsMaster(const ReplyView& role_reply) {
  return role_reply.IsArray() && role_reply.Size() >= 1 && role_reply[0].IsString() &&
         role_reply[0].Str() == "master";
}

std::optional<std::pair<std::string, keys::NodeAddress>> ParseSwitchMaster(
    std::string_view payload) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (start <= payload.size()) {
    const auto space = payload.find(' ', start);
    const auto end = space == std::string_view::npos ? payload.size() : space;
    fields.push_back(payload.substr(start, end - start));
    if (space == std::string_view::npos) break;
    start = space + 1;
  }
  if (fields.size() != 5 || fields[0].empty()) return std::nullopt;
  if (!AddressOf(fields[1], fields[2])) return std::nullopt;
  auto address = AddressOf(fields[3], fields[4]);
  if (!address) return std::nullopt;
  return std::make_pair(std::string(fields[0]), std::move(*address));
}

}  // namespace streamcar::redis
