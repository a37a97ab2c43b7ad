#include "sidecar/config/redis_url.h"

#include <cctype>
#include <charconv>
#include <string>

#include "sidecar/common/text.h"

namespace streamcar::config {
namespace {

std::optional<int> ParseInt(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A query parameter name that carries a credential: libpq's secret parameters (password,
// sslpassword, oauth_client_secret: the ones its conninfo options mark "*", never to be shown)
// and anything else named like one. The name is compared percent-decoded and in any case, as
// libpq decodes it ("pass%77ord" is "password").
bool IsSecretUrlParameter(std::string_view name) {
  std::string decoded;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && i + 2 < name.size() && HexDigitValue(name[i + 1]) >= 0 &&
        HexDigitValue(name[i + 2]) >= 0) {
      decoded += static_cast<char>(HexDigitValue(name[i + 1]) * 16 + HexDigitValue(name[i + 2]));
      i += 2;
    } else {
      decoded += name[i];
    }
  }
  for (char& c : decoded) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view word : {"pass", "pwd", "secret", "token"}) {
    if (decoded.find(word) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::optional<RedisEndpoint> ParseRedisUrl(std::string_view url, std::string* error) {
  auto fail = [&](const std::string& message) -> std::optional<RedisEndpoint> {
    *error = message;
    return std::nullopt;
  };
  RedisEndpoint endpoint;
  std::string_view rest;
  if (url.starts_with("redis://")) {
    rest = url.substr(8);
  } else if (url.starts_with("rediss://")) {
    endpoint.kind = RedisEndpoint::Kind::kTls;
    rest = url.substr(9);
  } else if (url.starts_with("unix://")) {
    endpoint.kind = RedisEndpoint::Kind::kUnix;
    rest = url.substr(7);
    auto query = rest.find('?');
    endpoint.path = std::string(rest.substr(0, query));
    if (endpoint.path.empty() || endpoint.path[0] != '/') {
      return fail("unix URL needs an absolute socket path (unix:///path/to/redis.sock)");
    }
    if (query != std::string_view::npos) {
      auto params = rest.substr(query + 1);
      if (!params.starts_with("db=")) return fail("unix URL accepts only the ?db=N parameter");
      auto db = ParseInt(params.substr(3));
      if (!db || *db < 0) return fail("invalid database number in \"" + std::string(params) + "\"");
      endpoint.db = *db;
    }
    return endpoint;
  } else {
    return fail("URL must start with redis://, rediss:// or unix:// (got \"" +
                MaskUrlPassword(url) + "\")");
  }

  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    auto userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = userinfo.find(':');
    endpoint.username = std::string(userinfo.substr(0, colon));
    if (colon != std::string_view::npos)
      endpoint.password = std::string(userinfo.substr(colon + 1));
  }
  auto slash = rest.find('/');
  auto hostport = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    auto db_text = rest.substr(slash + 1);
    if (!db_text.empty()) {
      auto db = ParseInt(db_text);
      if (!db || *db < 0) return fail("invalid database number \"" + std::string(db_text) + "\"");
      endpoint.db = *db;
    }
  }
  if (hostport.starts_with("[")) {  // [::1]:6379
    auto close = hostport.find(']');
    if (close == std::string_view::npos) return fail("unterminated IPv6 address in URL");
    endpoint.host = std::string(hostport.substr(1, close - 1));
    hostport = hostport.substr(close + 1);
    if (!hostport.empty() && hostport[0] != ':') return fail("unexpected text after IPv6 address");
    if (!hostport.empty()) hostport = hostport.substr(1);
    if (!hostport.empty()) {
      auto port = ParseInt(hostport);
      if (!port || *port < 1 || *port > 65535)
        return fail("invalid port \"" + std::string(hostport) + "\"");
      endpoint.port = *port;
    }
  } else {
    auto colon = hostport.rfind(':');
    endpoint.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      auto port_text = hostport.substr(colon + 1);
      auto port = ParseInt(port_text);
      if (!port || *port < 1 || *port > 65535)
        return fail("invalid port \"" + std::string(port_text) + "\"");
      endpoint.port = *port;
    }
  }
  if (endpoint.host.empty()) return fail("URL has no host");
  return endpoint;
}

std::string RedisEndpoint::Describe() const {
  if (kind == Kind::kUnix) return "unix://" + path + (db ? "?db=" + std::to_string(db) : "");
  std::string out = kind == Kind::kTls ? "rediss://" : "redis://";
  if (!username.empty() || !password.empty()) {
    out += username;
    if (!password.empty()) out += ":***";
    out += "@";
  }
  out += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  out += ":" + std::to_string(port) + "/" + std::to_string(db);
  return out;
}

std::string MaskUrlPassword(std::string_view url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url);
  // The password of the user info. The last '@' anywhere, as ParseRedisUrl reads it: an '@' in
  // the query masks too much (the host), never too little.
  size_t rest = scheme_end + 3;
  std::string out(url.substr(0, rest));
  const size_t at = url.rfind('@');
  const size_t colon = url.find(':', rest);
  if (at != std::string_view::npos && at > scheme_end && colon != std::string_view::npos &&
      colon < at) {
    out.append(url.substr(rest, colon + 1 - rest)).append("***");
    rest = at;
  }
  const size_t query = url.find('?', rest);
  out.append(url.substr(rest, query == std::string_view::npos ? query : query - rest));
  if (query == std::string_view::npos) return out;
  // The query: libpq (and other clients) take credentials as parameters too.
  const size_t fragment = url.find('#', query);
  std::string_view params =
      url.substr(query + 1, fragment == std::string_view::npos ? std::string_view::npos
                                                               : fragment - query - 1);
  out += '?';
  while (true) {
    const size_t amp = params.find('&');
    const std::string_view param = params.substr(0, amp);
    const size_t equals = param.find('=');
    if (equals != std::string_view::npos && equals + 1 < param.size() &&
        IsSecretUrlParameter(param.substr(0, equals))) {
      out.append(param.substr(0, equals + 1)).append("***");
    } else {
      out.append(param);
    }
    if (amp == std::string_view::npos) break;
    out += '&';
    params.remove_prefix(amp + 1);
  }
  if (fragment != std::string_view::npos) out.append(url.substr(fragment));
  return out;
}

}  // namespace streamcar::config
