#pragma once
// Makes real consumers of a real redis-server old, for tests of anything that goes by a
// consumer's idle time (SPEC 4.6's consumer reaping). Redis measures idle time itself and a
// test cannot wait an hour, and libfaketime does not work with Debian's redis-server (its
// allocator recurses into clock_gettime). What does work: DUMP the stream, move the consumers'
// millisecond times inside the payload back, fix the payload's CRC-64 and RESTORE ... REPLACE it.
// The consumers then report `idle` (and, on Redis 7.2+, `inactive`) that much larger; their
// pending entries, and those entries' own delivery times, are left as they were.
//
// The payload is a stream in RDB types 15, 19 or 21 (Redis 5 to 7.0 and 7.2+: 21 adds each
// consumer's active-time); anything else throws. A consumer name that RDB stored compressed
// (LZF, only names longer than 20 bytes) is never matched.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/redis_server.h"

namespace streamcar::testing {

// Redis's crc64 (src/crc64.c: the Jones polynomial 0xad93d23594c935a9, reflected, initial value
// 0, no final xor), the checksum in the last 8 bytes (little-endian) of a DUMP payload.
uint64_t RedisCrc64(std::string_view data, uint64_t crc = 0);
// Whether a DUMP payload's last 8 bytes are the crc64 of everything before them.
bool DumpChecksumMatches(std::string_view payload);

// The payload with the seen-time (and active-time) of every consumer named in `names`, in every
// group, moved `by` into the past, and its checksum fixed. Throws std::runtime_error on a
// payload it cannot read, or when none of `names` is found.
std::string AgeConsumersInDump(std::string payload, const std::vector<std::string>& names,
                               std::chrono::milliseconds by);

// DUMP `stream`, AgeConsumersInDump, RESTORE `stream` 0 <payload> REPLACE. Fails the test on an
// error reply.
void AgeConsumers(const RedisServer& redis, const std::string& stream,
                  const std::vector<std::string>& names, std::chrono::milliseconds by);

}  // namespace streamcar::testing
