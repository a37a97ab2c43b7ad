#include "sidecar/config/url_rules.h"

#include "sidecar/common/url.h"
#include "sidecar/config/redis_url.h"

namespace streamcar::config {
namespace {

// "what" in the URL, masked.
std::string In(const std::string& what, const std::string& url) {
  return what + " in " + MaskUrlPassword(url);
}

std::string Got(const std::string& what, const std::string& url) {
  return what + " (got \"" + MaskUrlPassword(url) + "\")";
}

std::optional<std::string> ReadSqlite(const Url& parsed, ArchiveUrl* out) {
  // sqlite:///var/lib/x.db: an empty authority, then an absolute path (a relative one would
  // depend on the working directory of whoever started the sidecar).
  if (!parsed.hosts.front().text.empty() || parsed.path.size() < 2 || parsed.query ||
      parsed.fragment) {
    return std::string("a SQLite archive is sqlite:///absolute/path/to/file.db");
  }
  auto path = PercentDecode(parsed.path);
  if (!path) return std::string("invalid percent-escape in the path (write '%' itself as %25)");
  out->sqlite_path = std::move(*path);
  return std::nullopt;
}

}  // namespace

std::string CheckHttpUrl(const std::string& url) {
  const std::string scheme = UrlScheme(url);
  if (scheme != "http" && scheme != "https") {
    return Got("must be an http:// or https:// URL", url);
  }
  std::string why;
  const auto parsed = ParseUrl(url, &why);
  if (!parsed) return In(why, url);
  if (!parsed->username.empty() || parsed->password) {
    return In("credentials are not sent from the URL (put them in the handler's headers or auth)",
              url);
  }
  return {};
}

std::string CheckOtlpEndpoint(const std::string& url) {
  if (url.empty()) return {};
  const std::string scheme = UrlScheme(url);
  if (scheme == "https") {
    return Got("must be an http:// URL", url) +
           ": the OTLP exporter speaks plain HTTP; send to a collector agent that forwards over "
           "TLS";
  }
  if (scheme != "http") {
    return Got("must be an http:// URL such as http://otel-collector:4318/v1/traces", url);
  }
  return CheckHttpUrl(url);
}

std::optional<ArchiveUrl> ParseArchiveUrl(const std::string& url, std::string* error) {
  const std::string scheme = UrlScheme(url);
  ArchiveUrl out;
  std::string why;
  if (scheme == "sqlite") {
    const auto parsed = ParseUrl(url, &why, UrlRules{.empty_host = true});
    if (parsed) {
      auto problem = ReadSqlite(*parsed, &out);
      if (!problem) return out;
      why = *problem;
    }
  } else if (scheme == "postgres" || scheme == "postgresql") {
    out.kind = ArchiveUrl::Kind::kPostgres;
    if (url.size() == scheme.size() + 3) {
      why = "a PostgreSQL URL has no host";
    } else if (ParseUrl(url, &why, UrlRules{.empty_host = true, .host_list = true})) {
      out.postgres_uri = scheme + url.substr(scheme.size());
      return out;
    }
  } else {
    *error = Got("must be sqlite:///path or postgres://user@host:5432/db", url);
    return std::nullopt;
  }
  *error = In(why, url);
  return std::nullopt;
}

std::string CheckArchiveUrl(const std::string& url) {
  if (url.empty()) return {};
  std::string error;
  return ParseArchiveUrl(url, &error) ? std::string() : error;
}

}  // namespace streamcar::config
