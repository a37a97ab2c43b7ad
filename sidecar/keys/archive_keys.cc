#include "sidecar/keys/archive_keys.h"

#include "sidecar/keys/key_slot.h"

namespace streamcar::keys {

ArchiveKeys ArchiveKeysOf(std::string_view stream) {
  return {keys::SameSlotKey(stream, "archive:lease"), keys::SameSlotKey(stream, "archive:token"),
          keys::SameSlotKey(stream, "archive:watermark")};
}

}  // namespace streamcar::keys
