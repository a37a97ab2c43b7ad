// OpenArchive: the backend by URL scheme. PostgreSQL is compiled in only with
// STREAMCAR_POSTGRES (CMake defines STREAMCAR_HAVE_POSTGRES then).

#include "sidecar/config/redis_url.h"
#include "sidecar/log/archive_store.h"
#include "sidecar/log/sqlite_archive.h"
#ifdef STREAMCAR_HAVE_POSTGRES
#include "sidecar/log/postgres_archive.h"
#endif

namespace streamcar::log {

StatusOr<std::unique_ptr<ArchiveStore>> OpenArchive(const std::string& url) {
  constexpr std::string_view kSqlite = "sqlite://";
  if (url.starts_with(kSqlite)) {
    // sqlite:///var/lib/x.db: the path is what follows the scheme, and it must be absolute (a
    // relative path would depend on the working directory of whoever started the sidecar).
    const std::string path = url.substr(kSqlite.size());
    if (path.empty() || path[0] != '/') {
      return Status(StatusCode::kInvalid, "archive url " + config::MaskUrlPassword(url) +
                                              ": expected sqlite:///absolute/path/to/file.db");
    }
    return OpenSqliteArchive(path);
  }
  if (url.starts_with("postgres://") || url.starts_with("postgresql://")) {
#ifdef STREAMCAR_HAVE_POSTGRES
    return OpenPostgresArchive(url);
#else
    return Status(StatusCode::kInvalid,
                  "archive url: this build has no PostgreSQL support (configure with "
                  "-DSTREAMCAR_POSTGRES=ON and libpq installed)");
#endif
  }
  // Only the scheme is echoed: the rest of a URL may hold a password.
  const auto scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "(none)" : url.substr(0, scheme_end);
  return Status(StatusCode::kInvalid, "archive url: unknown scheme " + scheme +
                                          " (sqlite:///path or postgres://user@host:5432/db)");
}

}  // namespace streamcar::log
