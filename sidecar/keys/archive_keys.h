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

// The keys of `stream`'s folder, named by keys::OwnedKey (keys/key_slot.h: the one rule for
// keys in a stream's slot), so streams "x" and "{x}" never share a folder's keys:
// "{orders}:archive:lease", "app:{feed}:archive:lease", "{5061}~{x}:archive:lease", ...
// No suffix here ends another, which OwnedKey needs for the names to differ.
ArchiveKeys ArchiveKeysOf(std::string_view stream);

}  // namespace streamcar::keys
