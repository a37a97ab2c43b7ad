#pragma once
// The Redis keys of a stream's archive folder, all in the stream's own cluster slot so that one
// script may touch them and the stream together (and the cluster mode can route them as one).

#include <string>
#include <string_view>

namespace streamcar::log {

struct ArchiveKeys {
  std::string lease;      // the folder's lease: holder name, with a TTL
  std::string token;      // the fencing token counter (INCR on every new lease)
  std::string watermark;  // W as last recorded, "<ms>-<seq>" (only ever raised)
};

// The hash tag of a key as Redis Cluster reads it: the text between the first '{' and the first
// '}' after it when that is not empty; "" when the key has none.
std::string_view HashTagOf(std::string_view key);

// The prefix of keys that live in `stream`'s slot: "<stream>:" when the name carries a hash tag
// (the tag decides), else "{<stream>}:" (the whole name becomes the tag). The second form is in
// the stream's slot unless the name holds a '}' (a tag cannot contain one); docs/archive.md says
// so.
std::string SameSlotPrefix(std::string_view stream);

ArchiveKeys ArchiveKeysOf(std::string_view stream);

}  // namespace streamcar::log
