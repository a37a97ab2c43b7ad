#pragma once
// The one reader of the URLs streamcar is given (redis.url, the handler's urls, archive.url,
// tracing.otlp_endpoint), by RFC 3986: scheme "://" authority path ["?" query] ["#" fragment],
// the authority being [userinfo "@"] host [":" port]. What each key accepts on top of that (its
// schemes, whether a host may be empty, a database in the path) is its caller's rule.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace streamcar {

// One host of an authority.
struct UrlHost {
  std::string host;   // without brackets; "" only where the caller allows an empty host
  bool ipv6 = false;  // written as a bracketed IPv6 literal ("[::1]")
  int port = 0;       // 1..65535, or 0 when the URL gives none (the scheme's default applies)
  std::string text;   // as written, brackets and port included: an HTTP Host header
};

struct Url {
  std::string scheme;  // lower case (RFC 3986 3.1: schemes are case-insensitive)
  std::string username;
  std::optional<std::string> password;  // absent: no ':' in the user info
  std::vector<UrlHost> hosts;           // exactly one unless UrlRules::host_list
  std::string path;                     // as written (percent-encoded): "" or "/..."
  std::optional<std::string> query;     // after '?', as written
  std::optional<std::string> fragment;  // after '#', as written
};

struct UrlRules {
  bool empty_host = false;  // "scheme:///path" and "scheme://:port" are allowed
  // The authority may list hosts separated by ',' (libpq: "postgres://h1:5432,h2:5433/db").
  bool host_list = false;
};

// `text` split and checked: a scheme followed by "://"; the user info percent-decoded (the last
// '@' of the authority ends it, so an unencoded '@' in a password still reads as one); each host
// a name, an IPv4 address or a bracketed IPv6 literal (zone ids and IPvFuture refused); a port of
// 1 to 65535 ("host:" is the default port, as RFC 3986 3.2.3 reads it). nullopt and `*error`
// ("invalid port \"99999\"") otherwise. An error never quotes the user info, nor text that may be
// part of it.
std::optional<Url> ParseUrl(std::string_view text, std::string* error,
                            const UrlRules& rules = UrlRules{});

// The scheme of `text` in lower case ("HTTPS://h" gives "https"), or "" when `text` does not
// start with one followed by "://": what a key's rules branch on before reading the rest.
std::string UrlScheme(std::string_view text);

// Every "%XY" replaced by its byte; nullopt when a '%' is not followed by two hex digits.
std::optional<std::string> PercentDecode(std::string_view text);

// `text` with every byte but RFC 3986's unreserved ones as "%XY": a user name or a path segment
// written back into a URL.
std::string PercentEncode(std::string_view text);

}  // namespace streamcar
