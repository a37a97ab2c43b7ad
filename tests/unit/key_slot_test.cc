// Redis Cluster key slots. Every expected slot below is what CLUSTER KEYSLOT answered on this
// machine's redis-server 7.0.15 (a --cluster-enabled node), not a value computed by our code.

#include "sidecar/keys/key_slot.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

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

// Issue 29 (review F5): SameSlotKey names "x" and "{x}" alike, so the keys a stream owns are
// named by OwnedKey: one-to-one, in the slot of the key, and SameSlotKey's name wherever that
// was already unambiguous (existing deployments keep their keys).
TEST(KeySlotTest, OwnedKeysOfTwoKeysNeverCollideAndStayInTheSlot) {
  EXPECT_EQ(keys::OwnedKey("orders", "archive:lease"), "{orders}:archive:lease");
  EXPECT_EQ(keys::OwnedKey("app:{feed}", "archive:lease"), "app:{feed}:archive:lease");
  EXPECT_EQ(keys::OwnedKey("{x}y", "s"), "{x}y:s");
  EXPECT_EQ(keys::OwnedKey("x", "s"), "{x}:s");
  const std::string braced = keys::OwnedKey("{x}", "s");
  EXPECT_NE(braced, keys::OwnedKey("x", "s"));
  EXPECT_EQ(braced.front(), '{') << braced;
  EXPECT_TRUE(braced.ends_with("}~{x}:s")) << braced;
  EXPECT_EQ(keys::KeySlot(braced), keys::KeySlot("{x}"));
  EXPECT_EQ(keys::KeySlot(braced), keys::KeySlot("x"));
  // A name shaped like form (c) is itself named by (c), so it cannot meet the name it mimics.
  const std::string mimic = keys::OwnedKey(braced.substr(0, braced.size() - 2), "s");
  EXPECT_NE(mimic, braced);
  EXPECT_NE(keys::OwnedKey("{{a}", "s"), keys::OwnedKey("{a", "s"));

  // Every name over the characters the three forms use, up to 5 of them, with each suffix of the
  // archive: all different, all in the slot of their key.
  std::vector<std::string> names = {""};
  for (size_t from = 0; from < names.size(); ++from) {
    if (names[from].size() == 5) continue;
    for (char c : std::string("{}x~1:")) names.push_back(names[from] + c);
  }
  std::map<std::string, std::string> seen;
  for (const auto& name : names) {
    for (const char* suffix : {"archive:lease", "archive:token", "archive:watermark"}) {
      const std::string owned = keys::OwnedKey(name, suffix);
      ASSERT_EQ(keys::KeySlot(owned), keys::KeySlot(name)) << name << " -> " << owned;
      auto [at, fresh] = seen.emplace(owned, name);
      ASSERT_TRUE(fresh) << owned << " from \"" << name << "\" and \"" << at->second << "\"";
    }
  }
}

}  // namespace
}  // namespace streamcar::redis
