// The dead-letter record of SPEC 3.3: what the runtime writes is what `dlq list` and
// `dlq replay` read back, whatever the original fields are called.

#include "sidecar/redis/dead_letter_record.h"

#include <gtest/gtest.h>

#include "tests/unit/resp_reply.h"

namespace streamcar::redis {
namespace {

using testing::ArgsOf;
using testing::Bulk;
using testing::Err;
using testing::Nil;
using testing::ReplyOf;
using Fields = std::vector<std::pair<std::string, std::string>>;

// Writes `entry` as the runtime does (XADD dlq * fields...) and reads the record back from the
// command's own bytes, as XRANGE would return it.
DeadLetterRecord WriteThenRead(const StreamEntry& entry, const DeadLetterMeta& meta) {
  Command add("XADD");
  add.Arg("s:dlq").Arg("*");
  AppendDeadLetterFields("s", "g", entry, meta, &add);
  const auto args = ArgsOf(add);
  StreamEntry written;
  written.id = "9-1";
  for (size_t i = 3; i + 1 < args.size(); i += 2) written.fields.emplace_back(args[i], args[i + 1]);
  return DeadLetterRecord(std::move(written));
}

TEST(DeadLetterRecordTest, WriteThenReadRoundTrips) {
  StreamEntry entry;
  entry.id = "5-3";
  entry.fields = {{"k", "v"}, {"k", "w"}, {"blob", std::string("\x00\xFF", 2)}};
  DeadLetterMeta meta{"rejected", "422", std::string(2000, 'e'), 3, 1700000000000};
  DeadLetterRecord record = WriteThenRead(entry, meta);
  EXPECT_EQ(record.id(), "9-1");
  EXPECT_EQ(record.Original(), entry.fields);
  EXPECT_EQ(record.Meta("streamcar.stream"), "s");
  EXPECT_EQ(record.Meta("streamcar.id"), "5-3");
  EXPECT_EQ(record.Meta("streamcar.group"), "g");
  EXPECT_EQ(record.MetaInteger("streamcar.attempts"), 3);
  EXPECT_EQ(record.Meta("streamcar.reason"), "rejected");
  EXPECT_EQ(record.Meta("streamcar.status"), "422");
  EXPECT_EQ(record.Meta("streamcar.error"), std::string(1024, 'e'));  // the first 1 KiB
  EXPECT_EQ(record.MetaInteger("streamcar.time"), 1700000000000);
  EXPECT_TRUE(record.BelongsTo("s", "g"));
  EXPECT_FALSE(record.BelongsTo("s", "other"));
  EXPECT_FALSE(record.BelongsTo("t", "g"));
}

TEST(DeadLetterRecordTest, WritesTheMetadataInSpecOrderAfterTheOriginalFields) {
  StreamEntry entry;
  entry.id = "5-3";
  entry.fields = {{"n", "1"}};
  Command add("XADD");
  AppendDeadLetterFields("s", "g", entry, {"dropped", "200", "", 1, 7}, &add);
  EXPECT_EQ(ArgsOf(add),
            (std::vector<std::string>{"XADD", "n", "1", "streamcar.stream", "s", "streamcar.id",
                                      "5-3", "streamcar.group", "g", "streamcar.attempts", "1",
                                      "streamcar.reason", "dropped", "streamcar.status", "200",
                                      "streamcar.error", "", "streamcar.time", "7"}));
}

TEST(DeadLetterRecordTest, AnOriginalFieldNamedLikeTheMetadataDoesNotShadowIt) {
  StreamEntry entry;
  entry.id = "5-3";
  // Original fields that look like metadata, the last one right before the real metadata.
  entry.fields = {{"streamcar.reason", "forged"},
                  {"n", "1"},
                  {"streamcar.group", "other"},
                  {"streamcar.time", "0"}};
  DeadLetterRecord record = WriteThenRead(entry, {"max_attempts", "503", "down", 5, 42});
  EXPECT_EQ(record.Meta("streamcar.reason"), "max_attempts");
  EXPECT_EQ(record.Meta("streamcar.group"), "g");
  EXPECT_EQ(record.MetaInteger("streamcar.time"), 42);
  EXPECT_TRUE(record.BelongsTo("s", "g"));
  // Only the trailing metadata is stripped: every original field is replayed.
  EXPECT_EQ(record.Original(), entry.fields);
}

TEST(DeadLetterRecordTest, ARecordWithoutMetadataIsAllOriginal) {
  StreamEntry entry;
  entry.id = "1-1";
  entry.fields = {{"n", "1"}};
  DeadLetterRecord record(entry);
  EXPECT_EQ(record.Original(), entry.fields);
  EXPECT_EQ(record.Meta("streamcar.reason"), "");
  EXPECT_EQ(record.MetaInteger("streamcar.attempts"), 0);
  EXPECT_FALSE(record.BelongsTo("s", "g"));
}

// Decode reads back every field the encoder writes, byte for byte: binary values, a binary
// error cut at 1 KiB, and a field named like the metadata among the original ones.
TEST(DeadLetterRecordTest, EncodeThenDecodeRoundTripsEveryField) {
  StreamEntry entry;
  entry.id = "5-3";
  entry.fields = {{"streamcar.reason", "forged"}, {"blob", std::string("\x00\xFF\n", 3)}};
  std::string error(1500, '\0');
  for (size_t i = 0; i < error.size(); ++i) error[i] = static_cast<char>(i % 256);
  const DeadLetterMeta meta{"max_attempts", "timeout", error, 7, 1700000000123};
  const DeadLetterRecord record = WriteThenRead(entry, meta);
  const DecodedDeadLetter decoded = record.Decode();
  EXPECT_EQ(decoded.stream, "s");
  EXPECT_EQ(decoded.original_id, "5-3");
  EXPECT_EQ(decoded.group, "g");
  EXPECT_EQ(decoded.attempts, "7");
  EXPECT_EQ(decoded.attempt_count, 7);
  EXPECT_EQ(decoded.reason, "max_attempts");
  EXPECT_EQ(decoded.status, "timeout");
  EXPECT_EQ(decoded.error, error.substr(0, kDeadLetterErrorBytes));
  EXPECT_EQ(decoded.time_ms, 1700000000123);
  EXPECT_EQ(record.Original(), entry.fields);
}

// A record some fields are missing from (an older or foreign writer) decodes them as "" and 0,
// and keeps what it has.
TEST(DeadLetterRecordTest, DecodeReadsMissingFieldsAsEmpty) {
  StreamEntry entry;
  entry.id = "1-1";
  entry.fields = {{"n", "1"},
                  {"streamcar.stream", "s"},
                  {"streamcar.attempts", "not a number"},
                  {"streamcar.reason", "rejected"}};
  const DecodedDeadLetter decoded = DeadLetterRecord(entry).Decode();
  EXPECT_EQ(decoded.stream, "s");
  EXPECT_EQ(decoded.original_id, "");
  EXPECT_EQ(decoded.group, "");
  EXPECT_EQ(decoded.attempts, "not a number");
  EXPECT_EQ(decoded.attempt_count, 0);
  EXPECT_EQ(decoded.reason, "rejected");
  EXPECT_EQ(decoded.status, "");
  EXPECT_EQ(decoded.error, "");
  EXPECT_EQ(decoded.time_ms, 0);
  const DecodedDeadLetter none = DeadLetterRecord(StreamEntry{"2-1", {{"n", "1"}}}).Decode();
  EXPECT_EQ(none.stream, "");
  EXPECT_EQ(none.reason, "");
  EXPECT_EQ(none.attempt_count, 0);
}

TEST(DeadLetterRecordTest, ReplaySendsTheOriginalFieldsOnly) {
  StreamEntry entry;
  entry.id = "5-3";
  entry.fields = {{"streamcar.time", "mine"}, {"n", "1"}};
  DeadLetterRecord record = WriteThenRead(entry, {"rejected", "422", "bad", 1, 1});
  auto args = ArgsOf(Replay("orders", "orders:dlq", record));
  ASSERT_EQ(args.size(), 10u);
  EXPECT_EQ(args[0], "EVAL");
  EXPECT_EQ(args[2], "2");
  EXPECT_EQ(args[3], "orders");
  EXPECT_EQ(args[4], "orders:dlq");
  EXPECT_EQ(args[5], "9-1");  // the dead letter's own id
  EXPECT_EQ(std::vector<std::string>(args.begin() + 6, args.end()),
            (std::vector<std::string>{"streamcar.time", "mine", "n", "1"}));
}

TEST(DeadLetterRecordTest, ParseReplayTellsNewIdGoneAndError) {
  auto replayed = ParseReplay(ReplyOf(Bulk("7-1")).view());
  ASSERT_TRUE(replayed.ok());
  EXPECT_EQ(replayed->value_or(""), "7-1");
  auto gone = ParseReplay(ReplyOf(Nil()).view());
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
  auto failed = ParseReplay(ReplyOf(Err("WRONGTYPE Operation against a key")).view());
  EXPECT_TRUE(failed.status().IsServerError("WRONGTYPE"));
}

}  // namespace
}  // namespace streamcar::redis
