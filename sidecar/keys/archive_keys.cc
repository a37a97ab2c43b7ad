#include "sidecar/keys/archive_keys.h"

#include "sidecar/keys/key_slot.h"

namespace streamcar::keys {

ArchiveKeys ArchiveKeysOf(std::string_view stream) {
  return {OwnedKey(stream, "archive:lease"), OwnedKey(stream, "archive:token"),
          OwnedKey(stream, "archive:watermark")};
}

}  // namespace streamcar::keys
