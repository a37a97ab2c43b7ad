#pragma once
// The byte layer under the HTTP/1 handler client (http_client.h): one read or write that never
// waits, on a plain socket or a TLS session over it, the check of a connection that has no answer
// outstanding, and the TLS context of an https:// target.

#include <openssl/ssl.h>

#include <cstddef>
#include <memory>
#include <string>

#include "sidecar/common/status.h"
#include "sidecar/delivery/http_target.h"

namespace streamcar::delivery {

// What a connection with no answer outstanding holds (the blocking client's CheckIdle).
enum class Idle { kClean, kUnread, kClosed };

// One read or write that does not wait, on a plain socket or a TLS session over it.
struct Io {
  enum class Kind { kData, kWait, kEnd, kFailed };
  Kind kind = Kind::kWait;
  size_t bytes = 0;
  std::string error;
};

// `ssl` is null for a plain socket. kWait: try again when the socket is ready (for TLS, either
// way). A write never raises SIGPIPE.
Io WriteSomeBytes(int fd, SSL* ssl, const char* data, size_t size);
// kEnd: the peer ended the connection (or the TLS session, cleanly or not); the response parser
// decides whether an answer that ran to the end was complete.
Io ReadSomeBytes(int fd, SSL* ssl, char* buffer, size_t size);

// A read that must not wait. TLS 1.3 session tickets are consumed without surfacing (not
// "unsolicited"); any application byte, the end of the connection or an error makes it unusable.
Idle CheckIdle(int fd, SSL* ssl);

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

// For an https:// target: verified against the system trust store (SSL_CERT_FILE / SSL_CERT_DIR
// are honoured), TLS 1.2 at least; the name is checked per connection.
StatusOr<std::shared_ptr<SSL_CTX>> MakeTlsContext(const HttpTarget& target);

}  // namespace streamcar::delivery
