#include "sidecar/redis/transport.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace streamcar::redis {
namespace {

// Owns one file descriptor.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

int RemainingMs(SteadyTime deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Waits until `fd` is ready for `events`; kTimeout past the deadline.
Status WaitReady(int fd, short events, SteadyTime deadline) {
  while (true) {
    pollfd pfd{fd, events, 0};
    int rc = ::poll(&pfd, 1, RemainingMs(deadline));
    if (rc > 0) return Status::Ok();
    if (rc == 0) return Status(StatusCode::kTimeout, "no answer from Redis in time");
    if (errno != EINTR)
      return Status(StatusCode::kIo, std::string("poll: ") + std::strerror(errno));
  }
}

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

 private:
  UniqueFd fd_;
};

// Non-blocking connect bounded by the deadline.
Status ConnectFd(int fd, const sockaddr* address, socklen_t length, SteadyTime deadline) {
  if (::connect(fd, address, length) == 0) return Status::Ok();
  if (errno != EINPROGRESS && errno != EAGAIN) {
    return Status(StatusCode::kIo, std::strerror(errno));
  }
  if (auto s = WaitReady(fd, POLLOUT, deadline); !s.ok()) {
    return Status(s.code(), "connect timed out");
  }
  int error = 0;
  socklen_t error_length = sizeof(error);
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &error_length);
  if (error != 0) return Status(StatusCode::kIo, std::strerror(error));
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Transport>> ConnectSocket(const config::RedisEndpoint& endpoint,
                                                   Millis timeout) {
  const SteadyTime deadline = SteadyClock::now() + timeout;
  const std::string where = endpoint.Describe();
  if (endpoint.kind == config::RedisEndpoint::Kind::kUnix) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0)
      return Status(StatusCode::kIo, std::string("socket: ") + std::strerror(errno));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (endpoint.path.size() >= sizeof(address.sun_path)) {
      return Status(StatusCode::kInvalid, "unix socket path is too long: " + endpoint.path);
    }
    std::memcpy(address.sun_path, endpoint.path.c_str(), endpoint.path.size() + 1);
    auto s = ConnectFd(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address), deadline);
    if (!s.ok()) return Status(s.code(), "cannot connect to " + where + ": " + s.message());
    return std::unique_ptr<Transport>(new SocketTransport(std::move(fd)));
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(endpoint.port);
  if (int rc = ::getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Status(StatusCode::kIo,
                  "cannot resolve " + endpoint.host + " (" + where + "): " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  Status last(StatusCode::kIo, "no address");
  for (addrinfo* ai = addresses.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (fd.get() < 0) continue;
    last = ConnectFd(fd.get(), ai->ai_addr, ai->ai_addrlen, deadline);
    if (!last.ok()) continue;
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    return std::unique_ptr<Transport>(new SocketTransport(std::move(fd)));
  }
  return Status(last.code(), "cannot connect to " + where + ": " + last.message());
}

}  // namespace streamcar::redis
