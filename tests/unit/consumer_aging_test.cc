// The DUMP surgery of tests/support/consumer_aging.h, without a server: Redis's crc64 against its
// published check value and against the footers of real payloads (taken from Debian 12's
// redis-server 7.0.15), and the consumer's time it moves.

#include "tests/support/consumer_aging.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>

namespace streamcar::testing {
namespace {

std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  return out;
}

uint64_t LittleEndianAt(const std::string& data, size_t at) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<uint8_t>(data[at + i])} << (8 * i);
  return value;
}

// DUMP of `SET k hello`.
constexpr std::string_view kStringDump = "000568656c6c6f0a006372df766534200a";
// DUMP of stream st (RDB type 19, version 10): entry 1-1 {f: v}, group g, consumer c1 holding it
// and consumer idle2 with nothing pending.
constexpr std::string_view kStreamDump =
    "130110000000000000000100000000000000011d1d0000000a0001010001010181660200010201000100018176"
    "020401ff01010101010000010101670101010100000000000000010000000000000001a22bfc34a20100000102"
    "026331a22bfc34a201000001000000000000000100000000000000010569646c6532be2bfc34a2010000000a00"
    "e8bc9584b7ab8e93";
// Where idle2's seen-time is in kStreamDump (after its name "\x05idle2"), and c1's.
constexpr size_t kIdle2SeenAt = 124;
constexpr size_t kC1SeenAt = 93;

TEST(ConsumerAging, Crc64IsRedisCrc64) {
  // src/crc64.c's test: crc64(0, "123456789") == 0xe9c6d914c4b8d9ca.
  EXPECT_EQ(RedisCrc64("123456789"), 0xe9c6d914c4b8d9caULL);
  for (const auto hex : {kStringDump, kStreamDump}) {
    const std::string payload = FromHex(hex);
    EXPECT_EQ(RedisCrc64(std::string_view(payload).substr(0, payload.size() - 8)),
              LittleEndianAt(payload, payload.size() - 8));
    EXPECT_TRUE(DumpChecksumMatches(payload));
  }
  std::string broken = FromHex(kStringDump);
  broken[2] = 'H';
  EXPECT_FALSE(DumpChecksumMatches(broken));
}

TEST(ConsumerAging, MovesOnlyTheNamedConsumersSeenTimeBackAndFixesTheChecksum) {
  const std::string payload = FromHex(kStreamDump);
  ASSERT_EQ(payload.substr(kIdle2SeenAt - 6, 6), "\x05idle2");
  ASSERT_EQ(payload.substr(kC1SeenAt - 3, 3),
            "\x02"
            "c1");
  const std::string aged = AgeConsumersInDump(payload, {"idle2"}, std::chrono::hours(2));
  ASSERT_EQ(aged.size(), payload.size());
  EXPECT_EQ(LittleEndianAt(payload, kIdle2SeenAt) - LittleEndianAt(aged, kIdle2SeenAt), 7'200'000u);
  EXPECT_EQ(LittleEndianAt(aged, kC1SeenAt), LittleEndianAt(payload, kC1SeenAt));
  // Nothing else changed but the checksum, which is right again.
  for (size_t i = 0; i < payload.size() - 8; ++i) {
    if (i >= kIdle2SeenAt && i < kIdle2SeenAt + 8) continue;
    EXPECT_EQ(aged[i], payload[i]) << "byte " << i;
  }
  EXPECT_NE(aged.substr(aged.size() - 8), payload.substr(payload.size() - 8));
  EXPECT_TRUE(DumpChecksumMatches(aged));
}

TEST(ConsumerAging, RefusesWhatItCannotRead) {
  EXPECT_THROW(AgeConsumersInDump(FromHex(kStringDump), {"c1"}, std::chrono::hours(1)),
               std::runtime_error);
  EXPECT_THROW(AgeConsumersInDump(FromHex(kStreamDump), {"nobody"}, std::chrono::hours(1)),
               std::runtime_error);
  std::string cut = FromHex(kStreamDump);
  cut.erase(60, 40);
  EXPECT_THROW(AgeConsumersInDump(cut, {"idle2"}, std::chrono::hours(1)), std::runtime_error);
}

}  // namespace
}  // namespace streamcar::testing
