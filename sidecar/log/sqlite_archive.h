#pragma once
// The embedded archive backend: one SQLite file (WAL mode, synchronous=FULL so a committed fold
// survives a power cut before Redis is trimmed). For one replica: the file lives on its volume.

#include <memory>
#include <string>

#include "sidecar/log/archive_store.h"

namespace streamcar::log {

// Opens (creating if missing) the database at `path` and its schema. kIo when it cannot.
StatusOr<std::unique_ptr<ArchiveStore>> OpenSqliteArchive(const std::string& path);

}  // namespace streamcar::log
