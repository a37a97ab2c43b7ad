#pragma once
// The byte pipe under a Redis connection: plain TCP, a unix socket, or TLS (rediss://). hiredis
// 0.14 has no TLS (DESIGN.md trap 9), but its reply reader works on bytes from any transport, so
// TLS is OpenSSL over our own socket behind this same interface. Single-threaded: one owner.

#include <memory>
#include <string_view>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
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

// Opens the transport the endpoint asks for within `timeout`: TCP (TCP_NODELAY) or a unix socket,
// and for rediss:// a verified TLS session on top (see tls_transport.h). A TLS setup that
// retrying cannot fix (untrusted certificate, unreadable key) is kFatal.
StatusOr<std::unique_ptr<Transport>> ConnectTransport(const config::RedisEndpoint& endpoint,
                                                      const config::TlsConfig& tls, Millis timeout);

}  // namespace streamcar::redis
