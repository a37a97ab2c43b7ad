#include "sidecar/delivery/http_target.h"

#include "sidecar/common/url.h"
#include "sidecar/config/redis_url.h"

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

HttpTarget SplitUrl(const std::string& url) {
  HttpTarget target;
  std::string error;
  const auto parsed = ParseUrl(url, &error);
  if (!parsed) {
    // The configuration checked every url it holds (config/url_rules.h); one that does not parse
    // has port 0, which no connection reaches, and is named masked.
    target.port = 0;
    target.origin = config::MaskUrlPassword(url);
    target.path = "/";
    return target;
  }
  const UrlHost& host = parsed->hosts.front();
  target.tls = parsed->scheme == "https";
  target.host = host.host;
  target.port = host.port != 0 ? host.port : (target.tls ? 443 : 80);
  // The Host header: as the URL spells it (an IPv6 literal keeps its brackets), without the ':'
  // of an empty port.
  target.authority =
      host.text.ends_with(':') ? host.text.substr(0, host.text.size() - 1) : host.text;
  target.origin = parsed->scheme + "://" + target.authority;
  std::string path = parsed->path.empty() ? "/" : parsed->path;
  if (parsed->query) path += "?" + *parsed->query;  // a fragment is never sent
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
