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

// What a non-blocking call that moved no bytes waits for before it is worth trying again. A
// plain socket waits for what it was asked to do; TLS may need to read in order to write and the
// other way round (a key update, a renegotiation).
enum class IoWait { kReadable, kWritable };

class Transport {
 public:
  virtual ~Transport() = default;

  // Blocking use (the CLI, the connector, tests): each call waits up to its deadline.
  // Writes all of `data` before `deadline`.
  virtual Status WriteAll(std::string_view data, SteadyTime deadline) = 0;
  // Reads at least one byte into `buffer` before `deadline`; kIo when the peer closed.
  virtual StatusOr<size_t> ReadSome(char* buffer, size_t size, SteadyTime deadline) = 0;

  // Non-blocking use, for an event loop: one attempt, never waiting. The bytes moved, or 0 when
  // none can move now and the call is worth repeating once the fd is as `*wait` says; kIo when
  // the peer closed or the connection broke, kFatal for a TLS alert. A TLS write that moved
  // nothing must be repeated with at least the bytes it was given (more may be appended).
  virtual StatusOr<size_t> TryWrite(std::string_view data, IoWait* wait) = 0;
  virtual StatusOr<size_t> TryRead(char* buffer, size_t size, IoWait* wait) = 0;
  // Bytes already received and decrypted but not yet returned by TryRead: they raise no fd
  // event, so a loop reads again instead of sleeping (TLS only; a socket has none).
  virtual bool HasBuffered() const = 0;
  // The socket, to watch for readiness. Stays owned by the transport.
  virtual int fd() const = 0;
  // Between commands, nothing expected: the server ended the connection while it sat unused (a
  // restart, its idle `timeout`, CLIENT KILL). Consumes no reply bytes.
  virtual bool ClosedByPeer() = 0;
};

// Opens the transport the endpoint asks for within `timeout`: TCP (TCP_NODELAY) or a unix socket,
// and for rediss:// a verified TLS session on top (see tls_transport.h). A TLS setup that
// retrying cannot fix (untrusted certificate, unreadable key) is kFatal.
StatusOr<std::unique_ptr<Transport>> ConnectTransport(const config::RedisEndpoint& endpoint,
                                                      const config::TlsConfig& tls, Millis timeout);

}  // namespace streamcar::redis
