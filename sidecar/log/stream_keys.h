#pragma once
// The idempotency keys of appends (SPEC section 10), beside their stream in its Redis Cluster slot.
// The slot rules themselves live in one place: redis/topology/key_slot.h (SameSlotKey, KeySlot).

#include <string>
#include <string_view>

namespace streamcar::log {

// The idempotency key of an append to `stream` with Idempotency-Key `key`:
// redis::SameSlotKey(stream, "idem:" + key).
std::string IdempotencyKey(std::string_view stream, std::string_view key);

}  // namespace streamcar::log
