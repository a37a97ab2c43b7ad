#include "sidecar/delivery/http_target.h"

#include <charconv>

namespace streamcar::delivery {

std::string EncodeTarget(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : path) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f || c == '"' || c == '<' || c == '>') {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// The url was checked when the configuration was read (a port of 1 to 65535); what does not
// parse here is 0, which no connection reaches.
int PortOf(std::string_view digits) {
  int port = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  return error == std::errc() && end == digits.data() + digits.size() ? port : 0;
}

}  // namespace

HttpTarget SplitUrl(const std::string& url) {
  HttpTarget target;
  const size_t scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "http" : url.substr(0, scheme_end);
  target.tls = scheme == "https";
  target.port = target.tls ? 443 : 80;
  const size_t authority_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const size_t path_start = url.find_first_of("/?#", authority_start);
  target.authority = url.substr(authority_start, path_start - authority_start);
  target.origin = (target.tls ? "https://" : "http://") + target.authority;
  std::string_view authority = target.authority;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    target.host = std::string(
        authority.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
    authority.remove_prefix(close == std::string_view::npos ? authority.size() : close + 1);
    if (authority.starts_with(":")) target.port = PortOf(authority.substr(1));
  } else {
    const size_t colon = authority.rfind(':');
    target.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      target.port = PortOf(authority.substr(colon + 1));
    }
  }
  std::string path = path_start == std::string::npos ? "/" : url.substr(path_start);
  path = path.substr(0, path.find('#'));  // a fragment is never sent
  if (path.empty() || path[0] != '/') path = "/" + path;
  target.path = EncodeTarget(path);
  return target;
}

HttpTarget ViaUnixSocket(HttpTarget target, const std::string& path) {
  if (path.empty()) return target;
  target.unix_socket = path;
  target.origin += " via unix:" + path;
  return target;
}

}  // namespace streamcar::delivery
