#include "sidecar/redis/tls_transport.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <string>

#include "sidecar/common/tls_util.h"

namespace streamcar::redis {
namespace {

struct SslCtxDeleter {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
struct SslDeleter {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxDeleter>;
using SslPtr = std::unique_ptr<SSL, SslDeleter>;

class TlsTransport final : public Transport {
 public:
  TlsTransport(UniqueFd fd, SslCtxPtr ctx, SslPtr ssl)
      : fd_(std::move(fd)), ctx_(std::move(ctx)), ssl_(std::move(ssl)) {}

  Status WriteAll(std::string_view data, SteadyTime deadline) override {
    while (!data.empty()) {
      ERR_clear_error();
      const int n = SSL_write(ssl_.get(), data.data(), static_cast<int>(data.size()));
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      const int error = SSL_get_error(ssl_.get(), n);
      if (error == SSL_ERROR_SYSCALL) return ExplainLostWrite();
      if (Status s = WaitFor(error, deadline, "write"); !s.ok()) return s;
    }
    return Status::Ok();
  }

  StatusOr<size_t> ReadSome(char* buffer, size_t size, SteadyTime deadline) override {
    while (true) {
      ERR_clear_error();
      const int n = SSL_read(ssl_.get(), buffer, static_cast<int>(size));
      if (n > 0) return static_cast<size_t>(n);
      if (Status s = WaitFor(SSL_get_error(ssl_.get(), n), deadline, "read"); !s.ok()) return s;
    }
  }

  StatusOr<size_t> TryWrite(std::string_view data, IoWait* wait) override {
    *wait = IoWait::kWritable;
    if (data.empty()) return size_t{0};
    ERR_clear_error();
    const int n = SSL_write(ssl_.get(), data.data(), static_cast<int>(ClampedSize(data.size())));
    if (n > 0) return static_cast<size_t>(n);
    const int error = SSL_get_error(ssl_.get(), n);
    if (error == SSL_ERROR_SYSCALL) return ExplainLostWrite();
    return NothingMoved(error, wait, "write");
  }

  StatusOr<size_t> TryRead(char* buffer, size_t size, IoWait* wait) override {
    *wait = IoWait::kReadable;
    ERR_clear_error();
    const int n = SSL_read(ssl_.get(), buffer, static_cast<int>(ClampedSize(size)));
    if (n > 0) return static_cast<size_t>(n);
    return NothingMoved(SSL_get_error(ssl_.get(), n), wait, "read");
  }

  bool HasBuffered() const override { return SSL_pending(ssl_.get()) > 0; }
  int fd() const override { return fd_.get(); }
  bool ClosedByPeer() override {
    const PeerState raw = PeekPeer(fd_.get());
    if (raw == PeerState::kQuiet || SSL_pending(ssl_.get()) > 0) return false;
    if (raw == PeerState::kClosed) return true;
    // A record waits: Redis sends close_notify before it closes a TLS client; it may also be a
    // TLS 1.3 session ticket (taken in, nothing to return) or data. SSL_peek returns none of it.
    ERR_clear_error();
    char byte = 0;
    const int n = SSL_peek(ssl_.get(), &byte, 1);
    if (n > 0) return false;
    const int error = SSL_get_error(ssl_.get(), n);
    ERR_clear_error();
    return error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE;
  }

 private:
  // A write failed because the server closed the connection. A server that refuses us (TLS 1.3
  // sends "certificate required" after the handshake) has usually left an alert to read: report
  // that, because retrying cannot fix it; otherwise the connection was simply lost.
  Status ExplainLostWrite() {
    ERR_clear_error();
    char ignored[256];
    const int n = SSL_read(ssl_.get(), ignored, sizeof(ignored));
    if (n <= 0 && SSL_get_error(ssl_.get(), n) == SSL_ERROR_SSL) {
      return Status(StatusCode::kFatal, "TLS write refused: " + TakeOpenSslError());
    }
    ERR_clear_error();
    return Status(StatusCode::kIo, "TLS write failed: connection lost");
  }

  static size_t ClampedSize(size_t size) {
    constexpr size_t kMax = 1 << 30;  // SSL_read/SSL_write take an int
    return size < kMax ? size : kMax;
  }

  // After a non-blocking SSL_read/SSL_write that moved nothing: what to wait for, or why the
  // connection is over (the same texts as the blocking path).
  StatusOr<size_t> NothingMoved(int error, IoWait* wait, const char* what) {
    switch (error) {
      case SSL_ERROR_WANT_READ:
        *wait = IoWait::kReadable;
        return size_t{0};
      case SSL_ERROR_WANT_WRITE:
        *wait = IoWait::kWritable;
        return size_t{0};
      default:
        return WaitFor(error, SteadyTime{}, what);
    }
  }

  // After an SSL_read/SSL_write that did not complete: wait for the socket, or say why not.
  Status WaitFor(int error, SteadyTime deadline, const char* what) {
    switch (error) {
      case SSL_ERROR_WANT_READ:
        return WaitReady(fd_.get(), POLLIN, deadline);
      case SSL_ERROR_WANT_WRITE:
        return WaitReady(fd_.get(), POLLOUT, deadline);
      case SSL_ERROR_ZERO_RETURN:
        return Status(StatusCode::kIo, "Redis closed the TLS connection");
      case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        return Status(StatusCode::kIo, std::string("TLS ") + what + " failed: connection lost");
      default:
        // A TLS alert (e.g. "certificate required" from a server that wants mutual TLS, sent
        // after a TLS 1.3 handshake): the configuration does not match the server.
        return Status(StatusCode::kFatal,
                      std::string("TLS ") + what + " refused: " + TakeOpenSslError());
    }
  }

  UniqueFd fd_;
  SslCtxPtr ctx_;
  SslPtr ssl_;
};

}  // namespace

StatusOr<std::unique_ptr<Transport>> StartTls(UniqueFd fd, const config::RedisEndpoint& endpoint,
                                              const config::TlsConfig& tls, SteadyTime deadline) {
  ERR_clear_error();
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return Status(StatusCode::kFatal, "TLS: " + TakeOpenSslError());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  if (tls.verify) {
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    const bool loaded = tls.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx.get()) == 1
                                            : SSL_CTX_load_verify_locations(
                                                  ctx.get(), tls.ca_file.c_str(), nullptr) == 1;
    if (!loaded) {
      return Status(
          StatusCode::kFatal,
          "TLS: cannot load CA certificates from " +
              (tls.ca_file.empty() ? std::string("the system trust store") : tls.ca_file) +
              " (redis.tls.ca_file): " + TakeOpenSslError());
    }
  } else {
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  }
  if (!tls.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.cert_file.c_str()) != 1) {
      return Status(StatusCode::kFatal, "TLS: cannot load client certificate " + tls.cert_file +
                                            " (redis.tls.cert_file): " + TakeOpenSslError());
    }
    // The key's file name only: its contents are a secret and never appear in a message.
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx.get()) != 1) {
      return Status(StatusCode::kFatal, "TLS: cannot use client key " + tls.key_file +
                                            " (redis.tls.key_file): " + TakeOpenSslError());
    }
  }

  SslPtr ssl(SSL_new(ctx.get()));
  if (!ssl) return Status(StatusCode::kFatal, "TLS: " + TakeOpenSslError());
  SSL_set_fd(ssl.get(), fd.get());
  // A non-blocking writer repeats a write that could not complete from a buffer that may have
  // moved and grown meanwhile (transport.h); partial writes let it free what was sent.
  SSL_set_mode(ssl.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  const std::string name = tls.server_name.empty() ? endpoint.host : tls.server_name;
  if (IsIpAddress(name)) {
    if (tls.verify) X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), name.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl.get(), name.c_str());  // SNI
    if (tls.verify) SSL_set1_host(ssl.get(), name.c_str());
  }

  while (true) {
    ERR_clear_error();
    const int rc = SSL_connect(ssl.get());
    if (rc == 1) break;
    const int error = SSL_get_error(ssl.get(), rc);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (Status s = WaitReady(fd.get(), error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
          !s.ok()) {
        return Status(s.code(), "TLS handshake with " + endpoint.Describe() + ": " + s.message());
      }
      continue;
    }
    const long verify = SSL_get_verify_result(ssl.get());  // NOLINT(google-runtime-int)
    if (verify != X509_V_OK) {
      return Status(StatusCode::kFatal, "TLS: the certificate of " + endpoint.Describe() +
                                            " is not trusted for \"" + name +
                                            "\": " + X509_verify_cert_error_string(verify) +
                                            " (check redis.tls.ca_file and redis.tls.server_name)");
    }
    if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN) {
      ERR_clear_error();
      return Status(StatusCode::kIo, "TLS handshake with " + endpoint.Describe() +
                                         ": connection closed (is it a TLS port?)");
    }
    return Status(StatusCode::kFatal,
                  "TLS handshake with " + endpoint.Describe() + " failed: " + TakeOpenSslError());
  }
  return std::unique_ptr<Transport>(
      new TlsTransport(std::move(fd), std::move(ctx), std::move(ssl)));
}

}  // namespace streamcar::redis
