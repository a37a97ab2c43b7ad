#include "sidecar/redis/transport.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "sidecar/redis/socket_util.h"
#include "sidecar/redis/tls_transport.h"

namespace streamcar::redis {
namespace {

class SocketTransport final : public Transport {
 public:
  explicit SocketTransport(UniqueFd fd) : fd_(std::move(fd)) {}

  Status WriteAll(std::string_view data, SteadyTime deadline) override {
    while (!data.empty()) {
      ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (auto s = WaitReady(fd_.get(), POLLOUT, deadline); !s.ok()) return s;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return Status(StatusCode::kIo, std::string("write to Redis failed: ") + std::strerror(errno));
    }
    return Status::Ok();
  }

  StatusOr<size_t> ReadSome(char* buffer, size_t size, SteadyTime deadline) override {
    while (true) {
      ssize_t n = ::recv(fd_.get(), buffer, size, 0);
      if (n > 0) return static_cast<size_t>(n);
      if (n == 0) return Status(StatusCode::kIo, "Redis closed the connection");
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (auto s = WaitReady(fd_.get(), POLLIN, deadline); !s.ok()) return s;
        continue;
      }
      if (errno == EINTR) continue;
      return Status(StatusCode::kIo,
                    std::string("read from Redis failed: ") + std::strerror(errno));
    }
  }

  StatusOr<size_t> TryWrite(std::string_view data, IoWait* wait) override {
    *wait = IoWait::kWritable;
    if (data.empty()) return size_t{0};
    while (true) {
      ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
      if (errno == EINTR) continue;
      return Status(StatusCode::kIo, std::string("write to Redis failed: ") + std::strerror(errno));
    }
  }

  StatusOr<size_t> TryRead(char* buffer, size_t size, IoWait* wait) override {
    *wait = IoWait::kReadable;
    while (true) {
      ssize_t n = ::recv(fd_.get(), buffer, size, 0);
      if (n > 0) return static_cast<size_t>(n);
      if (n == 0) return Status(StatusCode::kIo, "Redis closed the connection");
      if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
      if (errno == EINTR) continue;
      return Status(StatusCode::kIo,
                    std::string("read from Redis failed: ") + std::strerror(errno));
    }
  }

  bool HasBuffered() const override { return false; }
  int fd() const override { return fd_.get(); }
  // Unexpected bytes count as open: the next command's read finds them out of step.
  bool ClosedByPeer() override { return PeekPeer(fd_.get()) == PeerState::kClosed; }

 private:
  UniqueFd fd_;
};

}  // namespace

StatusOr<std::unique_ptr<Transport>> ConnectTransport(const config::RedisEndpoint& endpoint,
                                                      const config::TlsConfig& tls,
                                                      Millis timeout) {
  const SteadyTime deadline = SteadyClock::now() + timeout;
  auto fd = ConnectEndpoint(endpoint, deadline);
  if (!fd.ok()) return fd.status();
  if (endpoint.kind == config::RedisEndpoint::Kind::kTls) {
    return StartTls(std::move(*fd), endpoint, tls, deadline);
  }
  return std::unique_ptr<Transport>(new SocketTransport(std::move(*fd)));
}

}  // namespace streamcar::redis
