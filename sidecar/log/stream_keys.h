#pragma once
// Keys that belong beside a stream in its Redis Cluster slot (SPEC section 10): the idempotency
// keys of appends, and any other per-stream key a script must touch in the same step as the
// stream. The one place that spells the rule, so every user of it lands in the same slot.

#include <string>
#include <string_view>

namespace streamcar::log {

// The key "<suffix>" of `stream`, in the slot of `stream`:
//   - the stream has a hash tag ("{orders}", "app:{feed}"):  "<stream>:<suffix>"
//   - otherwise:                                             "{<stream>}:<suffix>"
//   - otherwise, when the name holds a '}' (so "{<stream>}" would tag only part of it):
//     "{<tag>}:<stream>:<suffix>" with a short tag chosen to hash to the stream's slot.
std::string StreamSlotKey(std::string_view stream, std::string_view suffix);

// The idempotency key of an append to `stream` with Idempotency-Key `key`:
// StreamSlotKey(stream, "idem:" + key).
std::string IdempotencyKey(std::string_view stream, std::string_view key);

// The Redis Cluster slot of `key` (CRC16 of its hash tag, or of the whole key), 0..16383.
int KeySlot(std::string_view key);

// Whether `key` has a hash tag: a '{' followed later by a '}' with at least one byte between.
bool HasHashTag(std::string_view key);

}  // namespace streamcar::log
