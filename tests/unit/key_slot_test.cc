// Redis Cluster key slots. Every expected slot below is what CLUSTER KEYSLOT answered on this
// machine's redis-server 7.0.15 (a --cluster-enabled node), not a value computed by our code.

#include "sidecar/keys/key_slot.h"

#include <gtest/gtest.h>

#include <string>

namespace streamcar::redis {
namespace {

TEST(KeySlotTest, Crc16IsXmodem) {
  // The check value of CRC-16/XMODEM, and the one in the Redis Cluster specification.
  EXPECT_EQ(keys::Crc16Xmodem("123456789"), 0x31C3);
  EXPECT_EQ(keys::Crc16Xmodem(""), 0);
  // Bytes above 0x7f are hashed as unsigned bytes.
  EXPECT_EQ(keys::Crc16Xmodem("\xff"), 0x1EF0);
}

TEST(KeySlotTest, SlotsAreWhatRedisSays) {
  struct Case {
    const char* key;
    int slot;
  };
  for (const Case& c :
       {Case{"123456789", 12739}, Case{"foo", 12182}, Case{"bar", 5061}, Case{"orders", 105},
        Case{"{orders}:dlq", 105}, Case{"orders:dlq", 9954}, Case{"a}b", 7866},
        Case{"{a}b}:dlq", 15495}, Case{"{user1000}.x", 3443}, Case{"user1000", 3443},
        Case{"foo{}{bar}", 8363}, Case{"foo{{bar}}zap", 4015}, Case{"{bar", 4015},
        Case{"foo{bar}{zap}", 5061}, Case{"{}", 15257}, Case{"", 0}, Case{"\xff", 7920},
        Case{"日本", 10949}}) {
    EXPECT_EQ(keys::KeySlot(c.key), c.slot) << c.key;
  }
}

TEST(KeySlotTest, HashedPartIsTheFirstNonEmptyTag) {
  EXPECT_EQ(keys::HashedPart("{user1000}.following"), "user1000");
  EXPECT_EQ(keys::HashedPart("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(keys::HashedPart("foo{bar}{zap}"), "bar");
  // An empty first tag makes the whole key hashed, even with a later tag.
  EXPECT_EQ(keys::HashedPart("foo{}{bar}"), "foo{}{bar}");
  EXPECT_EQ(keys::HashedPart("a}b"), "a}b");
  EXPECT_EQ(keys::HashedPart("a{b"), "a{b");
  EXPECT_EQ(keys::HashedPart("}{x}"), "x");
  EXPECT_TRUE(keys::HasHashTag("{user1000}.x"));
  EXPECT_TRUE(keys::HasHashTag("app:{feed}"));
  EXPECT_FALSE(keys::HasHashTag("foo{}{bar}"));
  EXPECT_FALSE(keys::HasHashTag("a{}b"));
  EXPECT_FALSE(keys::HasHashTag("a}b"));
  EXPECT_FALSE(keys::HasHashTag("orders"));
}

TEST(KeySlotTest, SameSlotKeyNamesAKeyInTheSlotOfTheFirst) {
  EXPECT_EQ(keys::SameSlotKey("orders", "dlq"), "{orders}:dlq");
  EXPECT_EQ(keys::SameSlotKey("app:{feed}", "dlq"), "app:{feed}:dlq");
  EXPECT_EQ(keys::SameSlotKey("{user1000}.x", "idem:k"), "{user1000}.x:idem:k");
  // "a}b": the literal "{a}b}:dlq" tags only "a" (15495, not 7866); a computed tag keeps the slot.
  const std::string dlq = keys::SameSlotKey("a}b", "dlq");
  EXPECT_EQ(keys::KeySlot(dlq), 7866) << dlq;
  EXPECT_EQ(dlq.front(), '{') << dlq;
  EXPECT_TRUE(dlq.ends_with("}:a}b:dlq")) << dlq;
  // Suffixes with braces of their own never move the key: the tag comes first.
  for (const char* key : {"orders", "app:{feed}", "a{}b", "a}b", "x{y", "}{", "{}}", "{}", "",
                          "日本", "foo{}{bar}"}) {
    for (const char* suffix : {"dlq", "idem:K{with}braces", "{x}", "}"}) {
      const std::string same = keys::SameSlotKey(key, suffix);
      EXPECT_EQ(keys::KeySlot(same), keys::KeySlot(key))
          << key << " + " << suffix << " -> " << same;
      EXPECT_NE(same.find(suffix), std::string::npos) << same;
    }
  }
  // Two keys of one slot never share a derived key.
  EXPECT_NE(keys::SameSlotKey("a}b", "k"), keys::SameSlotKey("a}c", "k"));
}

}  // namespace
}  // namespace streamcar::redis
