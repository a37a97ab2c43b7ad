#pragma once
// What each URL key of the configuration accepts, on top of the one URL reader (common/url.h):
// handler.url, a route's url and handler.health_url (CheckHttpUrl), tracing.otlp_endpoint
// (CheckOtlpEndpoint) and archive.url (ParseArchiveUrl). redis.url is redis_url.h's. Each check
// returns "" or what is wrong, with the URL masked (MaskUrlPassword); the caller names the key.

#include <optional>
#include <string>

namespace streamcar::config {

// An http:// or https:// URL with a host and no credentials.
std::string CheckHttpUrl(const std::string& url);

// "" (off) or a plain-HTTP OTLP/HTTP traces URL. The exporter speaks plain HTTP only: a
// collector agent on the node or in the pod carries TLS onwards.
std::string CheckOtlpEndpoint(const std::string& url);

// archive.url (SPEC 10): sqlite:///absolute/path (the path percent-decoded) or
// postgres[ql]://... (checked here, handed to libpq as written: it decodes the URI itself, and
// takes an empty host, a list of hosts and its parameters).
struct ArchiveUrl {
  enum class Kind { kSqlite, kPostgres };
  Kind kind = Kind::kSqlite;
  std::string sqlite_path;   // kSqlite
  std::string postgres_uri;  // kPostgres: the url with its scheme in lower case, as libpq reads it
};
std::optional<ArchiveUrl> ParseArchiveUrl(const std::string& url, std::string* error);

// "" (no archive) or what ParseArchiveUrl refuses.
std::string CheckArchiveUrl(const std::string& url);

}  // namespace streamcar::config
