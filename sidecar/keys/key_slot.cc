#include "sidecar/keys/key_slot.h"

#include <vector>

namespace streamcar::keys {
namespace {

// For every slot, a short decimal tag that hashes to it (found once, on first use: about 10^5
// CRCs, a few milliseconds).
const std::vector<std::string>& TagPerSlot() {
  static const std::vector<std::string> tags = [] {
    std::vector<std::string> found(kClusterSlots);
    int missing = kClusterSlots;
    for (uint64_t n = 0; missing > 0; ++n) {
      std::string tag = std::to_string(n);
      auto& slot = found[Crc16Xmodem(tag) % kClusterSlots];
      if (slot.empty()) {
        slot = std::move(tag);
        --missing;
      }
    }
    return found;
  }();
  return tags;
}

// "{x}": one hash tag and nothing else (x not empty, without '}'): the name (a) gives "x".
bool IsOneTag(std::string_view key) {
  return key.size() >= 3 && key.front() == '{' && key.find('}') == key.size() - 1;
}

// "{<digits>}~...": the form (c) gives.
bool StartsLikeSlotTag(std::string_view key) {
  size_t at = 1;
  while (at < key.size() && key[at] >= '0' && key[at] <= '9') ++at;
  return !key.empty() && key[0] == '{' && at > 1 && key.substr(at, 2) == "}~";
}

}  // namespace

uint16_t Crc16Xmodem(std::string_view bytes) {
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

std::string_view HashedPart(std::string_view key) {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return key;
  const auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

int KeySlot(std::string_view key) { return Crc16Xmodem(HashedPart(key)) % kClusterSlots; }

bool HasHashTag(std::string_view key) { return HashedPart(key).size() != key.size(); }

std::string SameSlotKey(std::string_view key, std::string_view suffix) {
  std::string out;
  if (HasHashTag(key)) {
    out.append(key).append(":").append(suffix);
  } else if (!key.empty() && key.find('}') == std::string_view::npos) {
    out.append("{").append(key).append("}:").append(suffix);
  } else {
    out.append("{").append(TagPerSlot()[KeySlot(key)]).append("}:");
    out.append(key).append(":").append(suffix);
  }
  return out;
}

std::string OwnedKey(std::string_view key, std::string_view suffix) {
  std::string out;
  if (!key.empty() && key.find('}') == std::string_view::npos) {
    out.append("{").append(key).append("}");
  } else if (HasHashTag(key) && !IsOneTag(key) && !StartsLikeSlotTag(key)) {
    out.append(key);
  } else {
    out.append("{").append(TagPerSlot()[KeySlot(key)]).append("}~").append(key);
  }
  return out.append(":").append(suffix);
}

}  // namespace streamcar::keys
