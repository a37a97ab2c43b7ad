#pragma once
// The byte pipe under a Redis connection. Plain TCP and unix sockets today; TLS (rediss://) is
// another implementation of the same interface (DESIGN.md trap 9: hiredis 0.14 has no TLS, but its
// reply reader works on bytes from any transport). Single-threaded: one owner.

#include <memory>
#include <string_view>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/config/redis_url.h"

namespace streamcar::redis {

class Transport {
 public:
  virtual ~Transport() = default;
  // Writes all of `data` before `deadline`.
  virtual Status WriteAll(std::string_view data, SteadyTime deadline) = 0;
  // Reads at least one byte into `buffer` before `deadline`; kIo when the peer closed.
  virtual StatusOr<size_t> ReadSome(char* buffer, size_t size, SteadyTime deadline) = 0;
};

// Opens a TCP (TCP_NODELAY) or unix-socket transport within `timeout`.
StatusOr<std::unique_ptr<Transport>> ConnectSocket(const config::RedisEndpoint& endpoint,
                                                   Millis timeout);

}  // namespace streamcar::redis
