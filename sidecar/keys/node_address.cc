#include "sidecar/keys/node_address.h"

namespace streamcar::keys {
namespace {

// A decimal port 1-65535, digits only (no sign, no spaces).
std::optional<int> ParsePort(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > 65535) return std::nullopt;
  return value;
}

bool HasSpaceOrControl(std::string_view text) {
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7f) return true;
  }
  return false;
}

std::optional<NodeAddress> Fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return std::nullopt;
}

}  // namespace

std::string NodeAddress::Describe() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::optional<NodeAddress> ParseNodeAddress(std::string_view text, std::string* error) {
  if (text.empty()) return Fail(error, "empty: expected host:port");
  if (text.find("://") != std::string_view::npos) {
    return Fail(error,
                "a URL: expected host:port (the scheme and credentials come from redis.url)");
  }
  if (HasSpaceOrControl(text))
    return Fail(error, "spaces or control characters: expected host:port");
  NodeAddress address;
  std::string_view port_text;
  if (text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return Fail(error, "no ']' closes the IPv6 address");
    address.host = std::string(text.substr(1, close - 1));
    if (address.host.empty()) return Fail(error, "empty host between '[' and ']'");
    if (address.host.find(':') == std::string::npos) {
      return Fail(error, "brackets are for IPv6 addresses only: write host:port");
    }
    const auto rest = text.substr(close + 1);
    if (rest.empty()) return Fail(error, "no port: expected [ipv6]:port");
    if (rest.front() != ':') return Fail(error, "expected ':' and a port after ']'");
    port_text = rest.substr(1);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return Fail(error, "no port: expected host:port");
    if (text.find(':') != colon) {
      return Fail(error, "an IPv6 address needs brackets: [" + std::string(text.substr(0, colon)) +
                             "]:" + std::string(text.substr(colon + 1)));
    }
    address.host = std::string(text.substr(0, colon));
    if (address.host.empty()) return Fail(error, "no host before ':': expected host:port");
    if (address.host.find_first_of("[]/@?#") != std::string::npos) {
      return Fail(error, "the host holds one of []/@?#: expected host:port");
    }
    port_text = text.substr(colon + 1);
  }
  if (port_text.empty()) return Fail(error, "no port after ':'");
  const auto port = ParsePort(port_text);
  if (!port) {
    return Fail(error, "port \"" + std::string(port_text) + "\" is not a number from 1 to 65535");
  }
  address.port = *port;
  return address;
}

std::optional<NodeAddress> ParseRedirectEndpoint(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto port = ParsePort(text.substr(colon + 1));
  if (!port) return std::nullopt;
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (HasSpaceOrControl(host)) return std::nullopt;
  return NodeAddress{std::string(host), *port};
}

}  // namespace streamcar::keys
