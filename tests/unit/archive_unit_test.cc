// The pure parts of the archive: the stored encoding of ids and fields, the Redis key naming
// rule, and how retention rules become one folder per archived stream.

#include <gtest/gtest.h>

#include <limits>

#include "sidecar/keys/archive_keys.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/log/archive_codec.h"
#include "sidecar/log/retention.h"

namespace streamcar::log {
namespace {

TEST(ArchiveCodecTest, FieldsRoundTripBytesRepeatsAndOrder) {
  const Fields fields = {{"b", "2"},
                         {"a", std::string("\0\xff\x80", 3)},
                         {"b", ""},
                         {"", std::string(200, 'x')},
                         {std::string(130, 'n'), std::string(70000, '\x01')}};
  auto decoded = DecodeFields(EncodeFields(fields));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, fields);
  auto empty = DecodeFields(EncodeFields({}));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(ArchiveCodecTest, DamagedBlobsAreRefusedNotOverread) {
  const std::string good = EncodeFields({{"name", "value"}});
  EXPECT_FALSE(DecodeFields("").ok());
  EXPECT_FALSE(DecodeFields(std::string(1, '\x02') + good.substr(1)).ok());  // unknown version
  for (size_t cut = 2; cut < good.size(); ++cut) {
    EXPECT_FALSE(DecodeFields(good.substr(0, cut)).ok()) << "cut at " << cut;
  }
  // A length far past the end, and a varint longer than 64 bits.
  EXPECT_FALSE(DecodeFields(std::string("\x01\xff\xff\xff\xff\x0f", 6)).ok());
  EXPECT_FALSE(DecodeFields(std::string("\x01") + std::string(11, '\xff') + "\x01").ok());
}

TEST(ArchiveCodecTest, StoredIdsKeepUnsignedOrder) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  const uint64_t values[] = {0, 1, (uint64_t{1} << 63) - 1, uint64_t{1} << 63, kMax - 1, kMax};
  for (size_t i = 0; i < std::size(values); ++i) {
    EXPECT_EQ(FromStored(ToStored(values[i])), values[i]);
    if (i > 0) {
      EXPECT_LT(ToStored(values[i - 1]), ToStored(values[i]));
    }
  }
  EXPECT_EQ(ToStored(0), std::numeric_limits<int64_t>::min());
}

TEST(ArchiveCodecTest, ReadRangesAreInclusiveBoundsOfExclusiveOnes) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  auto range = ReadRange("5-3", "9-0");
  ASSERT_TRUE(range.ok());
  ASSERT_TRUE(range->has_value());
  EXPECT_EQ((*range)->first, (EntryId{5, 4}));
  EXPECT_EQ((*range)->last, (EntryId{8, kMax}));
  auto open = ReadRange("", "");
  ASSERT_TRUE(open.ok() && open->has_value());
  EXPECT_EQ((*open)->first, (EntryId{0, 0}));
  EXPECT_EQ((*open)->last, (EntryId{kMax, kMax}));
  EXPECT_FALSE(ReadRange("5-3", "5-4")->has_value());  // nothing strictly between
  EXPECT_FALSE(ReadRange("", "0-0")->has_value());
  EXPECT_EQ(ReadRange("abc", "").status().code(), StatusCode::kInvalid);
  EXPECT_EQ(ReadRange("", "1-x").status().code(), StatusCode::kInvalid);
}

TEST(ArchiveKeysTest, KeysShareTheStreamsSlot) {
  EXPECT_EQ(keys::ArchiveKeysOf("orders").lease, "{orders}:archive:lease");
  EXPECT_EQ(keys::ArchiveKeysOf("orders").token, "{orders}:archive:token");
  EXPECT_EQ(keys::ArchiveKeysOf("orders").watermark, "{orders}:archive:watermark");
  // A name with a hash tag keeps it: the tag decides the slot of both.
  EXPECT_EQ(keys::ArchiveKeysOf("{tenant1}.orders").lease, "{tenant1}.orders:archive:lease");
  // Issue 29: "feed2" and "{feed2}" shared every key of their folders.
  EXPECT_NE(keys::ArchiveKeysOf("{feed2}").watermark, keys::ArchiveKeysOf("feed2").watermark);
  EXPECT_NE(keys::ArchiveKeysOf("{feed2}").token, keys::ArchiveKeysOf("feed2").token);
  EXPECT_NE(keys::ArchiveKeysOf("{feed2}").lease, keys::ArchiveKeysOf("feed2").lease);
  for (const std::string stream : {"orders", "{tenant1}.orders", "a{b", "{}x", "a}b", "{feed2}"}) {
    const auto keys = keys::ArchiveKeysOf(stream);
    for (const auto& key : {keys.lease, keys.token, keys.watermark}) {
      EXPECT_EQ(keys::KeySlot(key), keys::KeySlot(stream))
          << key << " is not in the slot of " << stream;
    }
  }
}

TEST(TrimRulesTest, ArchivedStreamGetsOneRuleThatUnitesEveryRetention) {
  config::Config config;
  config::Subscription sub;
  sub.stream = "feed";
  sub.retention.max_len = 1000;
  sub.retention.interval = Millis(60000);
  config.subscriptions.push_back(sub);
  config::LogStream feed;
  feed.name = "feed";
  feed.retention.max_age = Millis(3600000);
  feed.retention.max_len = 5000;
  feed.retention.interval = Millis(120000);
  feed.archive = true;
  config.streams.push_back(feed);
  config::LogStream plain;
  plain.name = "plain";
  plain.retention.max_len = 10;
  config.streams.push_back(plain);
  config::LogStream unbounded;  // no retention: nothing to trim, nothing to fold
  unbounded.name = "unbounded";
  unbounded.archive = true;
  config.streams.push_back(unbounded);
  config.archive.interval = Millis(30000);

  const auto rules = log::TrimRulesOf(config);
  ASSERT_EQ(rules.size(), 2u);
  const auto& merged = rules[1].stream == "feed" ? rules[1] : rules[0];
  const auto& other = rules[1].stream == "feed" ? rules[0] : rules[1];
  EXPECT_EQ(merged.stream, "feed");
  EXPECT_TRUE(merged.archive);
  EXPECT_EQ(merged.max_len, 1000);             // the tighter of 1000 and 5000
  EXPECT_EQ(merged.max_age, Millis(3600000));  // the only age limit
  EXPECT_EQ(merged.interval, Millis(30000));   // archive.interval is the shortest
  EXPECT_EQ(other.stream, "plain");
  EXPECT_FALSE(other.archive);
  EXPECT_EQ(other.max_len, 10);
}

}  // namespace
}  // namespace streamcar::log
