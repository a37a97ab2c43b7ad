#include "sidecar/log/archive_keys.h"

#include "sidecar/redis/topology/key_slot.h"

namespace streamcar::log {

ArchiveKeys ArchiveKeysOf(std::string_view stream) {
  return {redis::SameSlotKey(stream, "archive:lease"), redis::SameSlotKey(stream, "archive:token"),
          redis::SameSlotKey(stream, "archive:watermark")};
}

}  // namespace streamcar::log
