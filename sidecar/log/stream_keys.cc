#include "sidecar/log/stream_keys.h"

#include <array>
#include <cstdint>
#include <vector>

namespace streamcar::log {
namespace {

constexpr int kSlots = 16384;

// CRC16-CCITT (XMODEM), the hash Redis Cluster uses for slots.
uint16_t Crc16(std::string_view bytes) {
  uint16_t crc = 0;
  for (char c : bytes) {
    crc ^= static_cast<uint16_t>(static_cast<unsigned char>(c)) << 8;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

// The hash tag of `key` (the bytes Redis hashes), or the whole key.
std::string_view HashedPart(std::string_view key) {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return key;
  const auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

// For every slot, a short decimal tag that hashes to it (found once, on first use).
const std::vector<std::string>& TagPerSlot() {
  static const std::vector<std::string> tags = [] {
    std::vector<std::string> found(kSlots);
    int missing = kSlots;
    for (uint64_t n = 0; missing > 0; ++n) {
      std::string tag = std::to_string(n);
      auto& slot = found[Crc16(tag) % kSlots];
      if (slot.empty()) {
        slot = std::move(tag);
        --missing;
      }
    }
    return found;
  }();
  return tags;
}

}  // namespace

bool HasHashTag(std::string_view key) { return HashedPart(key).size() != key.size(); }

int KeySlot(std::string_view key) { return Crc16(HashedPart(key)) % kSlots; }

std::string StreamSlotKey(std::string_view stream, std::string_view suffix) {
  std::string key;
  if (HasHashTag(stream)) {
    key.append(stream).append(":").append(suffix);
  } else if (stream.find('}') == std::string_view::npos) {
    key.append("{").append(stream).append("}:").append(suffix);
  } else {
    key.append("{").append(TagPerSlot()[KeySlot(stream)]).append("}:");
    key.append(stream).append(":").append(suffix);
  }
  return key;
}

std::string IdempotencyKey(std::string_view stream, std::string_view key) {
  return StreamSlotKey(stream, std::string("idem:").append(key));
}

}  // namespace streamcar::log
