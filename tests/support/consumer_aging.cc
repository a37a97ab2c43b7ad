#include "tests/support/consumer_aging.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

namespace streamcar::testing {
namespace {

// RDB object types of a stream (src/rdb.h).
constexpr int kStreamListpacks = 15;
constexpr int kStreamListpacks2 = 19;  // + first id, max deleted id, entries added, entries read
constexpr int kStreamListpacks3 = 21;  // + each consumer's active-time

// Reads an RDB object body (src/rdb.c's rdbLoadObject for streams) and notes where the
// consumers' times are.
class PayloadReader {
 public:
  explicit PayloadReader(std::string_view data) : data_(data) {}

  size_t offset() const { return at_; }

  uint8_t Byte() {
    Need(1);
    return static_cast<uint8_t>(data_[at_++]);
  }
  void Skip(size_t n) {
    Need(n);
    at_ += n;
  }
  // rdbLoadLen. `encoded` (may be null): the special string encodings (11xxxxxx).
  uint64_t Length(bool* encoded = nullptr) {
    const uint8_t first = Byte();
    if (encoded != nullptr) *encoded = false;
    switch (first >> 6) {
      case 0:
        return first & 0x3F;
      case 1:
        return (uint64_t{first & 0x3Fu} << 8) | Byte();
      case 2: {
        const int bytes = first == 0x80 ? 4 : first == 0x81 ? 8 : 0;
        if (bytes == 0) throw std::runtime_error("unknown RDB length byte");
        uint64_t value = 0;
        for (int i = 0; i < bytes; ++i) value = (value << 8) | Byte();
        return value;
      }
      default:
        if (encoded == nullptr) throw std::runtime_error("an encoded value where a length is");
        *encoded = true;
        return first & 0x3F;
    }
  }
  // rdbGenericLoadStringObject: the string, or "" for an LZF-compressed one (skipped).
  std::string String() {
    bool encoded = false;
    const uint64_t length = Length(&encoded);
    if (!encoded) {
      Need(length);
      std::string value(data_.substr(at_, length));
      at_ += length;
      return value;
    }
    switch (length) {
      case 0:  // RDB_ENC_INT8 ... INT32: little-endian, signed
      case 1:
      case 2: {
        const int bytes = 1 << length;
        uint64_t raw = 0;
        for (int i = 0; i < bytes; ++i) raw |= uint64_t{Byte()} << (8 * i);
        const int shift = 64 - 8 * bytes;
        return std::to_string(static_cast<int64_t>(raw << shift) >> shift);
      }
      case 3: {  // RDB_ENC_LZF: compressed length, plain length, the compressed bytes
        const uint64_t compressed = Length();
        Length();
        Skip(compressed);
        return {};
      }
      default:
        throw std::runtime_error("unknown RDB string encoding");
    }
  }

 private:
  void Need(size_t n) const {
    if (data_.size() - at_ < n) throw std::runtime_error("DUMP payload ends early");
  }

  std::string_view data_;
  size_t at_ = 0;
};

void StoreLittleEndian(std::string* data, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i) (*data)[at + i] = static_cast<char>((value >> (8 * i)) & 0xFF);
}

uint64_t LoadLittleEndian(const std::string& data, size_t at) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<uint8_t>(data[at + i])} << (8 * i);
  return value;
}

}  // namespace

uint64_t RedisCrc64(std::string_view data, uint64_t crc) {
  constexpr uint64_t kReflectedJones = 0x95ac9329ac4bc9b5ULL;  // 0xad93d23594c935a9, bits reversed
  for (const char c : data) {
    crc ^= static_cast<uint8_t>(c);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) != 0 ? kReflectedJones : 0);
  }
  return crc;
}

bool DumpChecksumMatches(std::string_view payload) {
  if (payload.size() < 10) return false;
  const std::string body(payload.substr(0, payload.size() - 8));
  return RedisCrc64(body) == LoadLittleEndian(std::string(payload), payload.size() - 8);
}

std::string AgeConsumersInDump(std::string payload, const std::vector<std::string>& names,
                               std::chrono::milliseconds by) {
  if (payload.size() < 11) throw std::runtime_error("not a DUMP payload");
  // The footer: RDB version (2 bytes) and crc64 (8 bytes).
  PayloadReader in(std::string_view(payload).substr(0, payload.size() - 10));
  const int type = in.Byte();
  if (type != kStreamListpacks && type != kStreamListpacks2 && type != kStreamListpacks3) {
    throw std::runtime_error("not a stream of a known RDB type: " + std::to_string(type));
  }
  for (uint64_t nodes = in.Length(); nodes > 0; --nodes) {
    in.String();  // the node's master id
    in.String();  // its listpack
  }
  in.Length();  // entries
  in.Length();  // last id: ms, seq
  in.Length();
  if (type >= kStreamListpacks2) {
    for (int i = 0; i < 5; ++i) in.Length();  // first id, max deleted id, entries added
  }
  std::vector<size_t> times;  // offsets of the millisecond times to move back
  for (uint64_t groups = in.Length(); groups > 0; --groups) {
    in.String();  // the group's name
    in.Length();  // its last delivered id
    in.Length();
    if (type >= kStreamListpacks2) in.Length();  // entries read
    for (uint64_t pending = in.Length(); pending > 0; --pending) {
      in.Skip(16 + 8);  // the id, the delivery time
      in.Length();      // the delivery count
    }
    for (uint64_t consumers = in.Length(); consumers > 0; --consumers) {
      const std::string name = in.String();
      const bool aged = std::find(names.begin(), names.end(), name) != names.end();
      if (aged) times.push_back(in.offset());  // seen-time
      in.Skip(8);
      if (type >= kStreamListpacks3) {
        if (aged) times.push_back(in.offset());  // active-time
        in.Skip(8);
      }
      in.Skip(16 * in.Length());  // the consumer's pending ids
    }
  }
  if (times.empty()) throw std::runtime_error("none of the consumers is in the payload");
  for (const size_t at : times) {
    StoreLittleEndian(&payload, at, LoadLittleEndian(payload, at) - by.count());
  }
  const size_t footer = payload.size() - 8;
  StoreLittleEndian(&payload, footer, RedisCrc64(std::string_view(payload).substr(0, footer)));
  return payload;
}

void AgeConsumers(const RedisServer& redis, const std::string& stream,
                  const std::vector<std::string>& names, std::chrono::milliseconds by) {
  const redis::Reply dumped = redis.Run({"DUMP", stream});
  ASSERT_TRUE(dumped.view().IsString()) << "no stream " << stream;
  const std::string aged = AgeConsumersInDump(std::string(dumped.view().Str()), names, by);
  redis.Run({"RESTORE", stream, "0", aged, "REPLACE"});
}

}  // namespace streamcar::testing
