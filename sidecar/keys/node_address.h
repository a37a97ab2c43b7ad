#pragma once
// The address of one Redis node: as configured ("host:port", "[::1]:6379": cluster seeds,
// sentinels) and as Redis announces it in -MOVED/-ASK ("<endpoint>:<port>", IPv6 unbracketed).

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace streamcar::keys {

struct NodeAddress {
  std::string host;  // a name, an IPv4 or an IPv6 address (without brackets)
  int port = 0;

  // "host:port", or "[v6]:port" when the host holds a ':'.
  std::string Describe() const;
  // clang-tidy reads the comparison with 0 that C++ synthesizes from <=> as a null pointer.
  // NOLINTNEXTLINE(modernize-use-nullptr)
  friend auto operator<=>(const NodeAddress&, const NodeAddress&) = default;
};

// A configured address: "host:port" or "[ipv6]:port", port 1-65535. On failure, nullopt and
// `*error` says what is wrong (without repeating the text, which the caller names with its key).
std::optional<NodeAddress> ParseNodeAddress(std::string_view text, std::string* error);

// The "<endpoint>:<port>" of a -MOVED or -ASK reply. The host is everything before the LAST ':'
// (Redis writes IPv6 unbracketed: "::1:6379"), and may be empty (the node's endpoint is unknown:
// the client must use the host it sent the command to) or "?" (hostnames preferred but none
// configured: no usable host). Brackets, should a server add them, are removed. nullopt when the
// port is missing or not 1-65535.
std::optional<NodeAddress> ParseRedirectEndpoint(std::string_view text);

}  // namespace streamcar::keys
