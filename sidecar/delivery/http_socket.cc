#include "sidecar/delivery/http_socket.h"

#include <openssl/err.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "sidecar/common/tls_util.h"

namespace streamcar::delivery {

namespace {

Idle PeekIdle(int fd) {
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return Idle::kUnread;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Idle::kClean;
  return Idle::kClosed;  // the peer's EOF, or an error
}

Io Failed(std::string error) { return Io{Io::Kind::kFailed, 0, std::move(error)}; }

}  // namespace

Io WriteSomeBytes(int fd, SSL* ssl, const char* data, size_t size) {
  if (ssl != nullptr) {
    ERR_clear_error();
    const int n = SSL_write(ssl, data, static_cast<int>(std::min<size_t>(size, 1 << 30)));
    if (n > 0) return Io{Io::Kind::kData, static_cast<size_t>(n), {}};
    const int error = SSL_get_error(ssl, n);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return Io{};
    if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN) {
      ERR_clear_error();
      return Failed("TLS write failed: connection lost");
    }
    return Failed("TLS write refused: " + TakeOpenSslError());
  }
  while (true) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n > 0) return Io{Io::Kind::kData, static_cast<size_t>(n), {}};
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Io{};
    return Failed(std::string("send failed: ") +
                  (n < 0 ? std::strerror(errno) : "nothing written"));
  }
}

Io ReadSomeBytes(int fd, SSL* ssl, char* buffer, size_t size) {
  if (ssl != nullptr) {
    ERR_clear_error();
    const int n = SSL_read(ssl, buffer, static_cast<int>(std::min<size_t>(size, 1 << 30)));
    if (n > 0) return Io{Io::Kind::kData, static_cast<size_t>(n), {}};
    const int error = SSL_get_error(ssl, n);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return Io{};
    // The end of the TLS session, clean or not: the parser decides whether an answer that runs
    // to the end of the connection was complete (as the blocking client does).
    if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN) {
      ERR_clear_error();
      return Io{Io::Kind::kEnd, 0, {}};
    }
    return Failed("TLS read refused: " + TakeOpenSslError());
  }
  while (true) {
    const ssize_t n = ::recv(fd, buffer, size, 0);
    if (n > 0) return Io{Io::Kind::kData, static_cast<size_t>(n), {}};
    if (n == 0) return Io{Io::Kind::kEnd, 0, {}};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Io{};
    return Failed(std::string("connection lost: ") + std::strerror(errno));
  }
}

Idle CheckIdle(int fd, SSL* ssl) {
  if (ssl == nullptr) return PeekIdle(fd);
  char byte;
  const Io io = ReadSomeBytes(fd, ssl, &byte, 1);
  if (io.kind == Io::Kind::kData) return Idle::kUnread;
  return io.kind == Io::Kind::kWait ? Idle::kClean : Idle::kClosed;
}

StatusOr<std::shared_ptr<SSL_CTX>> MakeTlsContext(const HttpTarget& target) {
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SslCtxFree());
  if (ctx == nullptr) return Status(StatusCode::kInvalid, "TLS: " + TakeOpenSslError());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
    return Status(StatusCode::kInvalid, "TLS: cannot load the system trust store for " +
                                            target.origin + ": " + TakeOpenSslError());
  }
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return ctx;
}

}  // namespace streamcar::delivery
