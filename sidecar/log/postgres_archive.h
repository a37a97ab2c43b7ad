#pragma once
// The shared archive backend: PostgreSQL through libpq, for many replicas folding into one store.
// Built only with STREAMCAR_POSTGRES (CMake); archive_open.cc refuses postgres:// otherwise.

#include <memory>
#include <string>

#include "sidecar/log/archive_store.h"

namespace streamcar::log {

// Connects to `dsn` (a libpq URI or key=value string) and creates the schema if missing. kIo
// when the server cannot be reached or refuses.
StatusOr<std::unique_ptr<ArchiveStore>> OpenPostgresArchive(const std::string& dsn);

}  // namespace streamcar::log
