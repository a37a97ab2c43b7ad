#include "sidecar/common/url.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "sidecar/common/text.h"

namespace streamcar {
namespace {

bool IsUnreserved(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' || c == '_' ||
         c == '~';
}

// RFC 3986 2.2's sub-delims: with the unreserved characters, what a host name may hold.
bool IsSubDelim(char c) { return std::string_view("!$&'()*+,;=").find(c) != std::string::npos; }

bool IsSchemeChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '+' || c == '-' || c == '.';
}

// "" (the default) or a port of 1 to 65535; -1 otherwise.
int PortOf(std::string_view digits) {
  if (digits.empty()) return 0;
  int port = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size() || port < 1 || port > 65535) {
    return -1;
  }
  return port;
}

// "[v6]" with an optional ":port" after it.
std::optional<UrlHost> ParseBracketed(std::string_view text, std::string* error) {
  auto fail = [&](std::string message) -> std::optional<UrlHost> {
    *error = std::move(message);
    return std::nullopt;
  };
  const size_t close = text.find(']');
  if (close == std::string_view::npos) return fail("no ']' closes the IPv6 address");
  UrlHost out{.host = std::string(text.substr(1, close - 1)), .ipv6 = true};
  out.text = std::string(text);
  if (out.host.starts_with('v') || out.host.starts_with('V')) {
    return fail("IPvFuture addresses (\"[v...]\") are not supported");
  }
  if (out.host.find('%') != std::string::npos) {
    // RFC 6874's "[fe80::1%25eth0]": a link-local address needs its interface, which the
    // Host header and TLS names cannot carry; give a global or unique-local address.
    return fail("IPv6 zone ids (%25...) are not supported (got \"" + out.text +
                "\"): use an address without an interface");
  }
  in6_addr parsed{};
  if (::inet_pton(AF_INET6, out.host.c_str(), &parsed) != 1) {
    return fail("invalid IPv6 address \"" + std::string(text.substr(0, close + 1)) + "\"");
  }
  const std::string_view rest = text.substr(close + 1);
  if (rest.empty()) return out;
  if (rest.front() != ':')
    return fail("expected ':' and a port after ']' (got \"" + out.text + "\")");
  out.port = PortOf(rest.substr(1));
  if (out.port < 0) {
    return fail("invalid port \"" + std::string(rest.substr(1)) + "\" (1 to 65535)");
  }
  return out;
}

std::optional<UrlHost> ParseHost(std::string_view text, const UrlRules& rules, std::string* error) {
  auto fail = [&](std::string message) -> std::optional<UrlHost> {
    *error = std::move(message);
    return std::nullopt;
  };
  if (text.starts_with('[')) return ParseBracketed(text, error);
  const size_t colon = text.find(':');
  UrlHost out{.host = std::string(text.substr(0, colon)), .text = std::string(text)};
  if (colon != std::string_view::npos) {
    const std::string_view port_text = text.substr(colon + 1);
    if (port_text.find(':') != std::string_view::npos) {
      return fail("an IPv6 address needs brackets (\"[" + std::string(text) + "]\")");
    }
    out.port = PortOf(port_text);
    if (out.port < 0) return fail("invalid port \"" + std::string(port_text) + "\" (1 to 65535)");
  }
  if (out.host.empty() && !rules.empty_host) return fail("no host");
  for (const char c : out.host) {
    if (c == '%') return fail("a percent-encoded host name is not supported");
    if (!IsUnreserved(c) && !IsSubDelim(c)) {
      return fail("invalid character in the host \"" + out.host + "\"");
    }
  }
  return out;
}

// The user info's two parts, percent-decoded. The error names the part, never its text.
bool ReadUserInfo(std::string_view userinfo, Url* url, std::string* error) {
  const size_t colon = userinfo.find(':');
  auto username = PercentDecode(userinfo.substr(0, colon));
  if (!username) {
    *error =
        "invalid percent-escape in the user name (a '%' not followed by two hex digits; "
        "write '%' itself as %25)";
    return false;
  }
  url->username = std::move(*username);
  if (colon == std::string_view::npos) return true;
  auto password = PercentDecode(userinfo.substr(colon + 1));
  if (!password) {
    *error =
        "invalid percent-escape in the password (a '%' not followed by two hex digits; "
        "write '%' itself as %25)";
    return false;
  }
  url->password = std::move(*password);
  return true;
}

}  // namespace

std::string UrlScheme(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || !text.substr(colon).starts_with("://") ||
      std::isalpha(static_cast<unsigned char>(text.front())) == 0) {
    return {};
  }
  std::string scheme;
  for (const char c : text.substr(0, colon)) {
    if (!IsSchemeChar(c)) return {};
    scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return scheme;
}

std::optional<Url> ParseUrl(std::string_view text, std::string* error, const UrlRules& rules) {
  Url url;
  url.scheme = UrlScheme(text);
  if (url.scheme.empty()) {
    *error = "not a URL: expected scheme://host...";
    return std::nullopt;
  }
  const size_t start = url.scheme.size() + 3;
  const size_t end = std::min(text.find_first_of("/?#", start), text.size());
  std::string_view authority = text.substr(start, end - start);
  const size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    if (!ReadUserInfo(authority.substr(0, at), &url, error)) return std::nullopt;
    authority.remove_prefix(at + 1);
  }
  while (true) {
    const size_t comma = rules.host_list ? authority.find(',') : std::string_view::npos;
    auto host = ParseHost(authority.substr(0, comma), rules, error);
    if (!host) {
      if (at == std::string_view::npos && text.find('@', end) != std::string_view::npos) {
        // "redis://u:pa/ss@host": a '/' ended the authority within the password, and what reads
        // as the host is part of it, which the error would quote.
        *error =
            "no valid host before the path, and an '@' after it: a '/', '?' or '#' in a "
            "user name or password must be percent-encoded (%2F, %3F, %23)";
      }
      return std::nullopt;
    }
    url.hosts.push_back(std::move(*host));
    if (comma == std::string_view::npos) break;
    authority.remove_prefix(comma + 1);
  }
  std::string_view rest = text.substr(end);
  if (const size_t hash = rest.find('#'); hash != std::string_view::npos) {
    url.fragment = std::string(rest.substr(hash + 1));
    rest = rest.substr(0, hash);
  }
  if (const size_t question = rest.find('?'); question != std::string_view::npos) {
    url.query = std::string(rest.substr(question + 1));
    rest = rest.substr(0, question);
  }
  url.path = std::string(rest);
  return url;
}

std::optional<std::string> PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = HexDigitValue(text[i + 1]);
    const int low = HexDigitValue(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    if (IsUnreserved(c)) {
      out += c;
      continue;
    }
    const auto byte = static_cast<unsigned char>(c);
    out += '%';
    out += kHex[byte >> 4];
    out += kHex[byte & 0xf];
  }
  return out;
}

}  // namespace streamcar
