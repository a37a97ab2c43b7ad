// The reader of sidecar/redis/reply_reader.cc: replies built in one arena per reply read exactly
// as hiredis's own objects did, whatever the bytes (binary, nested, huge, split anywhere), and
// its failures are hiredis's.

#include <gtest/gtest.h>
#include <hiredis.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "sidecar/redis/reply.h"
#include "tests/support/sanitizer.h"
#include "tests/unit/resp_reply.h"

namespace streamcar::redis {
namespace {

using testing::Arr;
using testing::Bulk;
using testing::EntryResp;
using testing::Err;
using testing::Int;
using testing::Nil;
using testing::NilArray;

// Feeds `resp` in pieces of `step` bytes; every whole reply that comes out, in order.
std::vector<Reply> ReadAll(const std::string& resp, size_t step, bool* failed = nullptr) {
  ReaderPtr reader = NewReader();
  std::vector<Reply> out;
  for (size_t at = 0; at < resp.size(); at += step) {
    const size_t n = std::min(step, resp.size() - at);
    EXPECT_EQ(redisReaderFeed(reader.get(), resp.data() + at, n), REDIS_OK);
    while (true) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK) {
        if (failed != nullptr) *failed = true;
        return out;
      }
      if (raw == nullptr) break;
      out.emplace_back(ReplyPtr(static_cast<redisReply*>(raw)));
    }
  }
  return out;
}

// An XREADGROUP answer for `count` entries, each with a binary value of `value_size` (>= 2)
// bytes.
std::string ReadAnswer(size_t count, size_t value_size) {
  std::vector<std::string> entries;
  for (size_t i = 0; i < count; ++i) {
    std::string value(value_size, static_cast<char>('a' + i % 26));
    value[0] = '\0';
    entries.push_back(EntryResp("1700000000000-" + std::to_string(i), {"n", value, "k", "\r\n"}));
  }
  return Arr({Arr({Bulk("orders"), Arr(entries)})});
}

void ExpectReadAnswer(const Reply& reply, size_t count, size_t value_size) {
  ASSERT_EQ(reply.view().Size(), 1u);
  EXPECT_EQ(reply[0][0].Str(), "orders");
  const ReplyView entries = reply[0][1];
  ASSERT_EQ(entries.Size(), count);
  for (size_t i = 0; i < count; ++i) {
    const ReplyView entry = entries[i];
    ASSERT_EQ(entry[0].Str(), "1700000000000-" + std::to_string(i));
    ASSERT_EQ(entry[1].Size(), 4u);
    const std::string_view value = entry[1][1].Str();
    ASSERT_EQ(value.size(), value_size);
    EXPECT_EQ(value[0], '\0');
    EXPECT_EQ(value.back(), static_cast<char>('a' + i % 26));
    EXPECT_EQ(entry[1][3].Str(), "\r\n");
  }
}

TEST(ReplyReaderTest, EveryKindReadsAsHiredisObjectsDid) {
  const std::string resp = Arr({Bulk(std::string("a\0b", 3)), "+OK\r\n", Err("ERR no"), Int(-42),
                                Nil(), NilArray(), Arr({}), Arr({Arr({Int(7)})})});
  const auto replies = ReadAll(resp, resp.size());
  ASSERT_EQ(replies.size(), 1u);
  const ReplyView r = replies[0].view();
  ASSERT_TRUE(r.IsArray());
  ASSERT_EQ(r.Size(), 8u);
  EXPECT_EQ(r[0].Str(), std::string_view("a\0b", 3));
  EXPECT_TRUE(r[1].IsString());
  EXPECT_EQ(r[1].Str(), "OK");
  EXPECT_TRUE(r[2].IsError());
  EXPECT_EQ(r[2].Str(), "ERR no");
  EXPECT_TRUE(r[3].IsInteger());
  EXPECT_EQ(r[3].Integer(), -42);
  EXPECT_TRUE(r[4].IsNil());
  EXPECT_TRUE(r[5].IsNil());
  EXPECT_FALSE(r[5].IsArray());
  EXPECT_TRUE(r[6].IsArray());
  EXPECT_EQ(r[6].Size(), 0u);
  EXPECT_EQ(r[7][0][0].Integer(), 7);
  EXPECT_TRUE(r[8].IsNil());  // past the end
}

TEST(ReplyReaderTest, ScalarRootsStandAlone) {
  const auto replies = ReadAll("+PONG\r\n" + Int(5) + Nil() + NilArray() + Err("WRONGTYPE x"), 1);
  ASSERT_EQ(replies.size(), 5u);
  EXPECT_EQ(replies[0].view().Str(), "PONG");
  EXPECT_EQ(replies[1].view().Integer(), 5);
  EXPECT_TRUE(replies[2].IsNil());
  EXPECT_TRUE(replies[3].IsNil());
  EXPECT_TRUE(replies[4].IsError());
  EXPECT_EQ(replies[4].view().Str(), "WRONGTYPE x");
}

TEST(ReplyReaderTest, AManyBlockReplyArrivesSplitAnywhere) {
  // 500 entries take many arena blocks; one byte at a time splits every token.
  const std::string resp = ReadAnswer(500, 64);
  for (size_t step : {size_t{1}, size_t{7}, size_t{4096}, resp.size()}) {
    const auto replies = ReadAll(resp + resp, step);
    ASSERT_EQ(replies.size(), 2u) << step;
    ExpectReadAnswer(replies[0], 500, 64);
    ExpectReadAnswer(replies[1], 500, 64);
  }
}

TEST(ReplyReaderTest, HugeValuesAndArraysLargerThanABlock) {
  ExpectReadAnswer(ReadAll(ReadAnswer(3, 1 << 20), 65536).at(0), 3, 1 << 20);
  std::vector<std::string> many(20000, Int(1));
  const auto replies = ReadAll(Arr(many), 1000);
  ASSERT_EQ(replies.size(), 1u);
  ASSERT_EQ(replies[0].view().Size(), 20000u);
  EXPECT_EQ(replies[0][19999].Integer(), 1);
}

TEST(ReplyReaderTest, RepliesOutliveTheirReader) {
  std::vector<Reply> kept;
  {
    ReaderPtr reader = NewReader();
    const std::string resp = ReadAnswer(40, 10) + "+OK\r\n";
    redisReaderFeed(reader.get(), resp.data(), resp.size());
    for (void* raw = nullptr; redisReaderGetReply(reader.get(), &raw) == REDIS_OK && raw;) {
      kept.emplace_back(ReplyPtr(static_cast<redisReply*>(raw)));
      raw = nullptr;
    }
  }
  ASSERT_EQ(kept.size(), 2u);
  ExpectReadAnswer(kept[0], 40, 10);
  EXPECT_EQ(kept[1].view().Str(), "OK");
}

TEST(ReplyReaderTest, AHalfReadReplyIsFreedWithItsReader) {
  // The root and some children exist when the reader goes: redisReaderFree frees that arena.
  bool failed = false;
  EXPECT_TRUE(ReadAll("*100000\r\n" + Bulk("x") + Int(2), 3, &failed).empty());
  EXPECT_FALSE(failed);
}

TEST(ReplyReaderTest, BadBytesFailTheReaderAsHiredisDoes) {
  bool failed = false;
  // A bad type byte in the middle of an array: the partial reply is freed with the error.
  EXPECT_TRUE(ReadAll("*3\r\n" + Bulk("a") + "?x\r\n", 2, &failed).empty());
  EXPECT_TRUE(failed);
  failed = false;
  // A negative count other than -1 is no RESP (hiredis refuses it before any object function).
  EXPECT_TRUE(ReadAll("*-5\r\n", 5, &failed).empty());
  EXPECT_TRUE(failed);
  failed = false;
  // Nesting deeper than hiredis reads.
  std::string nested;
  for (int depth = 0; depth < 9; ++depth) nested += "*1\r\n";
  EXPECT_TRUE(ReadAll(nested + Int(1), 64, &failed).empty());
  EXPECT_TRUE(failed);
  // What came before a failure is whole.
  failed = false;
  const auto replies = ReadAll(Int(3) + "!\r\n", 64, &failed);
  EXPECT_TRUE(failed);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].view().Integer(), 3);
}

int64_t ResidentKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

TEST(ReplyReaderTest, AnAnnouncedCountCostsNoMemoryUntilItsElementsArrive) {
  // The count is the server's word: a header of ten million elements (80 MB of slots) followed
  // by two elements must not make the process resident in proportion to the header.
  ReaderPtr reader = NewReader();
  const int64_t before = ResidentKib();
  const std::string head = "*10000000\r\n" + Bulk("a") + Int(2);
  ASSERT_EQ(redisReaderFeed(reader.get(), head.data(), head.size()), REDIS_OK);
  void* raw = nullptr;
  ASSERT_EQ(redisReaderGetReply(reader.get(), &raw), REDIS_OK);
  EXPECT_EQ(raw, nullptr);  // not whole yet
  const int64_t grown = ResidentKib() - before;
  if (!testing::UnderSanitizer()) {
    EXPECT_LT(grown, 16 * 1024) << grown << " KiB";
  }
  reader.reset();  // the half-read reply is freed with its reader

  // Past 16 Mi elements the count is refused outright, and the reader fails.
  bool failed = false;
  EXPECT_TRUE(ReadAll("*100000000\r\n", 64, &failed).empty());
  EXPECT_TRUE(failed);
}

}  // namespace
}  // namespace streamcar::redis
