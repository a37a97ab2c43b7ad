#pragma once
// How the archive backends store an entry: its id as two order-preserving signed 64-bit integers
// (SQL has no unsigned 64-bit type, and Redis ids use the whole unsigned range), and its fields
// as one binary-safe blob (values are arbitrary bytes, names may repeat, order matters).
// Shared by every backend so that they agree byte for byte.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sidecar/common/status.h"
#include "sidecar/common/stream_entry.h"
#include "sidecar/common/text.h"

namespace streamcar::log {

using Fields = std::vector<std::pair<std::string, std::string>>;

// An unsigned id part as a signed integer with the same order: v - 2^63 (the top bit flipped),
// so 0 is INT64_MIN and 2^64-1 is INT64_MAX.
inline int64_t ToStored(uint64_t value) {
  return static_cast<int64_t>(value ^ (uint64_t{1} << 63));
}
inline uint64_t FromStored(int64_t stored) {
  return static_cast<uint64_t>(stored) ^ (uint64_t{1} << 63);
}

// Version byte 1, then for each field: varint(name length), name, varint(value length), value.
std::string EncodeFields(const Fields& fields);
// kProtocol when `blob` is not such an encoding (a damaged or foreign row).
StatusOr<Fields> DecodeFields(std::string_view blob);

// The ids of a fold's entries, in order; kInvalid naming the first that is not "<ms>-<seq>".
StatusOr<std::vector<EntryId>> FoldIds(const std::vector<StreamEntry>& entries);

// The inclusive id range [first, last] of a read "after < id < until" ("" = open); nullopt when
// it is empty. kInvalid for an id that is not "<ms>-<seq>".
struct IdRange {
  EntryId first;
  EntryId last;
};
StatusOr<std::optional<IdRange>> ReadRange(const std::string& after, const std::string& until);

}  // namespace streamcar::log
