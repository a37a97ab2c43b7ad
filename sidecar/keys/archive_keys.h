#pragma once
// The Redis keys of a stream's archive folder, all in the stream's own cluster slot so that one
// script may touch them and the stream together (and the cluster mode can route them as one).

#include <string>
#include <string_view>

namespace streamcar::keys {

struct ArchiveKeys {
  std::string lease;      // the folder's lease: holder name, with a TTL
  std::string token;      // the fencing token counter (INCR on every new lease)
  std::string watermark;  // W as last recorded, "<ms>-<seq>" (only ever raised)
};

// The keys of `stream`'s folder, named by keys::SameSlotKey (keys/key_slot.h: the one
// rule for keys in a stream's slot): "{orders}:archive:lease", "app:{feed}:archive:lease", ...
ArchiveKeys ArchiveKeysOf(std::string_view stream);

}  // namespace streamcar::keys
