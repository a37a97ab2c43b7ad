#include "sidecar/log/entry_id.h"

#include <gtest/gtest.h>

#include <map>

#include "sidecar/keys/archive_keys.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/keys/stream_keys.h"
#include "sidecar/log/log_reader.h"

namespace streamcar::log {
namespace {

using keys::HasHashTag;
using keys::KeySlot;

TEST(EntryIdTest, ParsesOnlyMsDashSeq) {
  auto id = ParseId("1764513000000-3");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->ms, 1764513000000u);
  EXPECT_EQ(id->seq, 3u);
  EXPECT_EQ(ParseId("18446744073709551615-18446744073709551615"), kMaxId);
  for (const char* bad : {"", "1", "1-", "-1", "1--2", "+1-2", "1-+2", " 1-2", "1-2 ", "1-*", "*",
                          "18446744073709551616-0", "1-18446744073709551616", "a-1"}) {
    EXPECT_FALSE(ParseId(bad)) << bad;
  }
}

TEST(EntryIdTest, ComparesNumericallyNotAsText) {
  EXPECT_LT(CompareIds("9-0", "10-0"), 0);
  EXPECT_LT(CompareIds("10-9", "10-10"), 0);
  EXPECT_EQ(CompareIds("10-10", "10-10"), 0);
  EXPECT_GT(CompareIds("11-0", "10-99"), 0);
  EXPECT_EQ(MaxId("9-5", "10-0"), "10-0");
  EXPECT_EQ(MaxId("10-1", "10-0"), "10-1");
}

TEST(EntryIdTest, SuccessorAndPredecessorCrossMilliseconds) {
  EXPECT_EQ(FormatId(*Successor(EntryId{5, 7})), "5-8");
  EXPECT_EQ(FormatId(*Successor(EntryId{5, UINT64_MAX})), "6-0");
  EXPECT_FALSE(Successor(kMaxId));
  EXPECT_EQ(FormatId(*Predecessor(EntryId{5, 7})), "5-6");
  EXPECT_EQ(FormatId(*Predecessor(EntryId{5, 0})), "4-18446744073709551615");
  EXPECT_FALSE(Predecessor(kMinId));
}

TEST(ParseBoundTest, MillisecondsAndIds) {
  EXPECT_EQ(*ParseBound("1764513000000"), "1764513000000-0");
  EXPECT_EQ(*ParseBound("0"), "0-0");
  EXPECT_EQ(*ParseBound("1764513000000-3"), "1764513000000-3");
  EXPECT_FALSE(ParseBound("18446744073709551616").ok());
  EXPECT_FALSE(ParseBound("1-18446744073709551616").ok());
}

TEST(ParseBoundTest, Rfc3339Instants) {
  // 2026-11-30T14:30:00Z = 1796049000 s since the epoch.
  EXPECT_EQ(*ParseBound("2026-11-30T14:30:00Z"), "1796049000000-0");
  EXPECT_EQ(*ParseBound("2026-11-30t14:30:00z"), "1796049000000-0");
  EXPECT_EQ(*ParseBound("2026-11-30 14:30:00Z"), "1796049000000-0");
  EXPECT_EQ(*ParseBound("2026-11-30T15:30:00+01:00"), "1796049000000-0");
  EXPECT_EQ(*ParseBound("2026-11-30T09:00:00-05:30"), "1796049000000-0");
  EXPECT_EQ(*ParseBound("2026-11-30T14:30:00.5Z"), "1796049000500-0");
  EXPECT_EQ(*ParseBound("2026-11-30T14:30:00.123Z"), "1796049000123-0");
  // Below a millisecond is truncated: the instant lies inside that millisecond.
  EXPECT_EQ(*ParseBound("2026-11-30T14:30:00.123999Z"), "1796049000123-0");
  EXPECT_EQ(*ParseBound("1970-01-01T00:00:00Z"), "0-0");
  EXPECT_EQ(*ParseBound("2024-02-29T00:00:00Z"), "1709164800000-0");
}

TEST(ParseBoundTest, InvalidInstantsSayWhy) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const auto& c : std::vector<Case>{
           {"", "expected an RFC 3339 instant"},
           {"yesterday", "expected an RFC 3339 instant"},
           {"2026-11-30", "expected an RFC 3339 instant"},
           {"2026-11-30T14:30:00", "needs a time zone"},
           {"2026-13-01T00:00:00Z", "month out of range"},
           {"2025-02-29T00:00:00Z", "no such day"},
           {"2026-11-30T24:00:00Z", "hour out of range"},
           {"2026-11-30T14:60:00Z", "minute out of range"},
           {"2026-11-30T14:30:00.Z", "followed by digits"},
           {"2026-11-30T14:30:00+1:00", "UTC offset"},
           {"2026-11-30T14:30:00Zjunk", "expected an RFC 3339 instant"},
           {"1969-12-31T23:59:59Z", "before 1970"},
           {"-5", "expected an RFC 3339 instant"},
       }) {
    auto parsed = ParseBound(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalid) << c.text;
    EXPECT_NE(parsed.status().message().find(c.says), std::string::npos)
        << c.text << ": " << parsed.status().message();
  }
}

TEST(StreamKeysTest, IdempotencyKeyStaysInTheStreamsSlot) {
  // Issue 29: the key's length ends the name, so stream and key can be read back from it.
  EXPECT_EQ(keys::IdempotencyKey("orders", "k1"), "{orders}:idem:k1:2");
  EXPECT_EQ(keys::IdempotencyKey("app:{feed}", "k1"), "app:{feed}:idem:k1:2");
  // Known Redis Cluster slots (CLUSTER KEYSLOT): "foo" is 12182, "{user1000}.following" 3443.
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("user1000"), 3443);
  // "{}" is no hash tag: the whole key is hashed.
  EXPECT_FALSE(HasHashTag("a{}b"));
  for (const char* stream : {"orders", "app:{feed}", "a{}b", "a}b", "x{y", "}{", "{}}", "日本"}) {
    const std::string key = keys::IdempotencyKey(stream, "K{with}braces");
    EXPECT_EQ(KeySlot(key), KeySlot(stream)) << stream << " -> " << key;
    EXPECT_NE(key.find(std::string("idem:K{with}braces")), std::string::npos) << key;
  }
  // Two streams never share an idempotency key.
  EXPECT_NE(keys::IdempotencyKey("a}b", "k"), keys::IdempotencyKey("a}c", "k"));
}

TEST(StreamKeysTest, ConsumerLeaseKeyIsSpelledOnceAndStaysInTheStreamsSlot) {
  EXPECT_EQ(keys::ConsumerLeaseKey("orders", "workers", "pod-0"),
            "{orders}:consumer:workers:pod-0:7:5:lease");
  EXPECT_EQ(keys::ConsumerLeaseKey("app:{feed}", "g", "c"), "app:{feed}:consumer:g:c:1:1:lease");
  EXPECT_NE(keys::ConsumerLeaseKey("s", "a:b", "c"), keys::ConsumerLeaseKey("s", "a", "b:c"));
}

// Every string over {'{', '}', 'x', ':', '~', '1'} up to `length` characters.
std::vector<std::string> AllStrings(size_t length) {
  std::vector<std::string> out = {""};
  for (size_t from = 0; from < out.size(); ++from) {
    if (out[from].size() == length) continue;
    for (char c : std::string("{}x:~1")) out.push_back(out[from] + c);
  }
  return out;
}

// Issue 29 (review F5): streams "x" and "{x}" shared their idempotency keys, so a POST to "{x}"
// could answer x's receipt and append nothing. No two (stream, key) pairs share a name now, nor
// does one equal an archive key or a consumer-name lease of any stream, and every name stays in its
// stream's slot.
TEST(StreamKeysTest, IdempotencyKeysNeverCollideWithEachOtherOrArchiveKeys) {
  EXPECT_NE(keys::IdempotencyKey("x", "K"), keys::IdempotencyKey("{x}", "K"));
  EXPECT_NE(keys::IdempotencyKey("{a}b", "c:idem:d"), keys::IdempotencyKey("{a}b:idem:c", "d"));
  std::map<std::string, std::string> seen;  // name -> what it was made from
  const auto streams = AllStrings(4);
  const auto idempotency_keys = AllStrings(2);
  for (const auto& stream : streams) {
    for (const auto& key : idempotency_keys) {
      if (key.empty()) continue;
      const std::string name = keys::IdempotencyKey(stream, key);
      ASSERT_EQ(KeySlot(name), KeySlot(stream)) << stream << " -> " << name;
      auto [at, fresh] = seen.emplace(name, stream + " / " + key);
      ASSERT_TRUE(fresh) << name << " from " << stream << " / " << key << " and " << at->second;
    }
  }
  // SPEC 4.7: the consumer-name leases of streams up to 3 characters, groups up to 2 and
  // consumers up to 1 (':' among them: the lengths at the end keep them apart).
  for (const auto& stream : AllStrings(3)) {
    for (const auto& group : AllStrings(2)) {
      for (const auto& consumer : AllStrings(1)) {
        const std::string name = keys::ConsumerLeaseKey(stream, group, consumer);
        ASSERT_EQ(KeySlot(name), KeySlot(stream)) << stream << " -> " << name;
        auto [at, fresh] = seen.emplace(name, stream + " lease " + group + " / " + consumer);
        ASSERT_TRUE(fresh) << name << " from " << stream << " / " << group << " / " << consumer
                           << " and " << at->second;
      }
    }
  }
  for (const auto& stream : streams) {
    const auto archive = keys::ArchiveKeysOf(stream);
    for (const auto& name : {archive.lease, archive.token, archive.watermark}) {
      ASSERT_EQ(KeySlot(name), KeySlot(stream)) << stream << " -> " << name;
      auto [at, fresh] = seen.emplace(name, stream + " archive");
      ASSERT_TRUE(fresh) << name << " from " << stream << " and " << at->second;
    }
  }
}

}  // namespace
}  // namespace streamcar::log
