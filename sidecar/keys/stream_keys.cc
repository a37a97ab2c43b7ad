#include "sidecar/keys/stream_keys.h"

#include "sidecar/keys/key_slot.h"

namespace streamcar::keys {

std::string DefaultDeadLetterStream(std::string_view stream, bool cluster) {
  if (cluster) return SameSlotKey(stream, kDeadLetterSuffix);
  return std::string(stream).append(":").append(kDeadLetterSuffix);
}

std::string IdempotencyKey(std::string_view stream, std::string_view key) {
  return OwnedKey(stream,
                  std::string("idem:").append(key).append(":").append(std::to_string(key.size())));
}

std::string ConsumerLeaseKey(std::string_view stream, std::string_view group,
                             std::string_view consumer) {
  std::string suffix("consumer:");
  suffix.append(group).append(":").append(consumer).append(":");
  suffix.append(std::to_string(group.size())).append(":").append(std::to_string(consumer.size()));
  return OwnedKey(stream, suffix.append(":lease"));
}

std::string NotifyChannel(std::string_view stream) { return std::string(stream) + ":events"; }

}  // namespace streamcar::keys
