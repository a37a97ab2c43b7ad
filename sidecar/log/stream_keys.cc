#include "sidecar/log/stream_keys.h"

#include "sidecar/redis/topology/key_slot.h"

namespace streamcar::log {

std::string IdempotencyKey(std::string_view stream, std::string_view key) {
  return redis::SameSlotKey(stream, std::string("idem:").append(key));
}

}  // namespace streamcar::log
