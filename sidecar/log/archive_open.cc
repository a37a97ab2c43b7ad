// OpenArchive: the backend by URL scheme. PostgreSQL is compiled in only with
// STREAMCAR_POSTGRES (CMake defines STREAMCAR_HAVE_POSTGRES then).

#include "sidecar/config/url_rules.h"
#include "sidecar/log/archive_store.h"
#include "sidecar/log/sqlite_archive.h"
#ifdef STREAMCAR_HAVE_POSTGRES
#include "sidecar/log/postgres_archive.h"
#endif

namespace streamcar::log {

StatusOr<std::unique_ptr<ArchiveStore>> OpenArchive(const std::string& url) {
  std::string error;
  const auto parsed = config::ParseArchiveUrl(url, &error);
  if (!parsed) return Status(StatusCode::kInvalid, "archive url: " + error);
  if (parsed->kind == config::ArchiveUrl::Kind::kSqlite)
    return OpenSqliteArchive(parsed->sqlite_path);
#ifdef STREAMCAR_HAVE_POSTGRES
  return OpenPostgresArchive(parsed->postgres_uri);
#else
  return Status(StatusCode::kInvalid,
                "archive url: this build has no PostgreSQL support (configure with "
                "-DSTREAMCAR_POSTGRES=ON and libpq installed)");
#endif
}

}  // namespace streamcar::log
