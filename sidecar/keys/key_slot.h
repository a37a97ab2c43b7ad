#pragma once
// Redis Cluster key slots: which of the 16384 slots a key hashes to, and how to name a key that
// must share a slot with another (a stream and its dead-letter stream, idempotency and archive
// keys). The one place that spells these rules; Redis's own is src/cluster.c keyHashSlot.

#include <cstdint>
#include <string>
#include <string_view>

namespace streamcar::keys {

inline constexpr int kClusterSlots = 16384;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the hash of Redis Cluster slots.
// Crc16Xmodem("123456789") == 0x31C3.
uint16_t Crc16Xmodem(std::string_view bytes);

// The bytes Redis hashes for `key`: between the first '{' and the first '}' after it when that is
// not empty ("{user1000}.x" -> "user1000", "foo{{bar}}" -> "{bar"), else the whole key
// ("foo{}{bar}" hashes whole).
std::string_view HashedPart(std::string_view key);

// The slot of `key`, 0..16383: CLUSTER KEYSLOT's answer.
int KeySlot(std::string_view key);

// Whether `key` has a hash tag (HashedPart is not the whole key).
bool HasHashTag(std::string_view key);

// The key "<suffix>" of `key`, in the slot of `key`:
//   - `key` has a hash tag ("{orders}", "app:{feed}"):   "<key>:<suffix>"
//   - otherwise, not empty and without a '}':             "{<key>}:<suffix>"
//   - otherwise ("a}b": "{a}b}" would tag only "a"; "" would make the empty "{}", no tag):
//     "{<tag>}:<key>:<suffix>" with a short decimal tag chosen to hash to the slot of `key`
//     (the same tag for every key of that slot).
// The suffix never changes the slot: the tag comes first.
// Two keys can get the same name ("x" and "{x}" both give "{x}:<suffix>"): fit for a default
// dead-letter stream (an existing deployment's name), not for keys one stream owns (OwnedKey).
std::string SameSlotKey(std::string_view key, std::string_view suffix);

// The key "<suffix>" that belongs to `key` alone, in the slot of `key`: "<owner>:<suffix>" where
// <owner> is
//   (a) "{<key>}" when `key` is not empty and has no '}' ("orders" -> "{orders}");
//   (b) `key` itself when it has a hash tag and is neither one tag alone ("{x}") nor starts
//       like (c) ("app:{feed}", "{tenant}.orders", "orders:{3}");
//   (c) otherwise "{<tag>}~<key>", the short decimal tag of the slot of `key` as in SameSlotKey
//       ("{x}", "a}b", "", "{12}~x").
// <owner> is one-to-one: (a) is exactly the one-tag form "{...}" that (b) leaves out, (c) starts
// with "{<digits>}~" that (a) cannot and (b) leaves out, and each form gives `key` back. So for
// a set of suffixes none of which ends another (":" included), two keys never share a name.
// (a) and (b) are SameSlotKey's names, so most keys kept the names they had before issue 29.
std::string OwnedKey(std::string_view key, std::string_view suffix);

}  // namespace streamcar::keys
