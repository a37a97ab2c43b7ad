#include "sidecar/config/redis_url.h"

#include <cctype>
#include <charconv>
#include <string>

#include "sidecar/common/text.h"
#include "sidecar/common/url.h"

namespace streamcar::config {
namespace {

// A query parameter name that carries a credential: libpq's secret parameters (password,
// sslpassword, oauth_client_secret: the ones its conninfo options mark "*", never to be shown)
// and anything else named like one, api keys and auth parameters of a handler's or a collector's
// url too. The name is compared percent-decoded and in any case, as libpq decodes it
// ("pass%77ord" is "password").
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
  for (std::string_view word : {"pass", "pwd", "secret", "token", "key", "auth", "credential"}) {
    if (decoded.find(word) != std::string::npos) return true;
  }
  return false;
}

// A database index: digits only, from 0.
std::optional<int> ParseDb(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

// unix://[user[:password]@]/path/to/socket[?db=N]: the path percent-decoded, no host; the user
// info is the credentials, as in redis:// (accepted and then ignored, it would fail as NOAUTH).
std::optional<std::string> ReadUnix(const Url& url, RedisEndpoint* endpoint) {
  if (!url.hosts.front().text.empty() || !url.path.starts_with('/')) {
    return std::string("a unix URL needs an absolute socket path (unix:///path/to/redis.sock)");
  }
  endpoint->username = url.username;
  endpoint->password = url.password.value_or("");
  auto path = PercentDecode(url.path);
  if (!path) return std::string("invalid percent-escape in the socket path");
  endpoint->path = std::move(*path);
  if (url.fragment) return std::string("a unix URL takes no #fragment");
  if (!url.query) return std::nullopt;
  if (!url.query->starts_with("db=")) {
    return std::string("a unix URL accepts only the ?db=N parameter");
  }
  auto db = ParseDb(std::string_view(*url.query).substr(3));
  if (!db) return "invalid database \"" + url.query->substr(3) + "\" (an integer from 0)";
  endpoint->db = *db;
  return std::nullopt;
}

// redis[s]://[user[:password]@]host[:port][/db]
std::optional<std::string> ReadTcp(const Url& url, RedisEndpoint* endpoint) {
  const UrlHost& host = url.hosts.front();
  if (host.host.empty()) return std::string("no host");
  endpoint->host = host.host;
  if (host.port != 0) endpoint->port = host.port;
  endpoint->username = url.username;
  endpoint->password = url.password.value_or("");
  if (url.query || url.fragment) {
    return std::string(
        "a redis URL takes no ?parameters or #fragment (the database is the path, /N; TLS and "
        "ACL settings are the keys of redis)");
  }
  const std::string_view db_text = url.path.empty() ? "" : std::string_view(url.path).substr(1);
  if (db_text.empty()) return std::nullopt;  // "" and "/": database 0
  if (db_text.find('@') != std::string_view::npos) {
    // "redis://u:1234/5@host": a '/' in the password cut the user info short; quoting the
    // "database" would print part of the password.
    return std::string(
        "invalid database after the host, and an '@' in it: a '/', '?' or '#' in a user name or "
        "password must be percent-encoded (%2F, %3F, %23)");
  }
  auto db = ParseDb(db_text);
  if (!db) return "invalid database \"" + std::string(db_text) + "\" (an integer from 0)";
  endpoint->db = *db;
  return std::nullopt;
}

}  // namespace

std::optional<RedisEndpoint> ParseRedisUrl(std::string_view text, std::string* error) {
  auto fail = [&](const std::string& message) -> std::optional<RedisEndpoint> {
    *error = message + " in " + MaskUrlPassword(text);
    return std::nullopt;
  };
  const std::string scheme = UrlScheme(text);
  if (scheme != "redis" && scheme != "rediss" && scheme != "unix") {
    *error = "URL must start with redis://, rediss:// or unix:// (got \"" + MaskUrlPassword(text) +
             "\")";
    return std::nullopt;
  }
  std::string why;
  // An empty host is unix://'s form; redis:// and rediss:// refuse it (ReadTcp).
  auto url = ParseUrl(text, &why, UrlRules{.empty_host = true});
  if (!url) return fail(why);
  RedisEndpoint endpoint;
  std::optional<std::string> problem;
  if (scheme == "unix") {
    endpoint.kind = RedisEndpoint::Kind::kUnix;
    problem = ReadUnix(*url, &endpoint);
  } else {
    if (scheme == "rediss") endpoint.kind = RedisEndpoint::Kind::kTls;
    problem = ReadTcp(*url, &endpoint);
  }
  if (problem) return fail(*problem);
  return endpoint;
}

std::string RedisEndpoint::Describe() const {
  if (kind == Kind::kUnix) return "unix://" + path + (db ? "?db=" + std::to_string(db) : "");
  std::string out = kind == Kind::kTls ? "rediss://" : "redis://";
  if (!username.empty() || !password.empty()) {
    out += PercentEncode(username);
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
  // The password of the user info. The last '@' anywhere, not only the authority's (ParseUrl's):
  // an '@' in the path or query masks too much (the host), never too little, and a password
  // holding an unencoded '/' is still masked whole.
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
