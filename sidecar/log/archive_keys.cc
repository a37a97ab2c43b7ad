#include "sidecar/log/archive_keys.h"

#include "sidecar/log/stream_keys.h"

namespace streamcar::log {

ArchiveKeys ArchiveKeysOf(std::string_view stream) {
  return {StreamSlotKey(stream, "archive:lease"), StreamSlotKey(stream, "archive:token"),
          StreamSlotKey(stream, "archive:watermark")};
}

}  // namespace streamcar::log
