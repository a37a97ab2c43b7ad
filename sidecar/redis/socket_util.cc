#include "sidecar/redis/socket_util.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

namespace streamcar::redis {
namespace {

int RemainingMs(SteadyTime deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

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

PeerState PeekPeer(int fd) {
  char byte = 0;
  while (true) {
    const ssize_t got = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got > 0) return PeerState::kBytesWaiting;
    if (got == 0) return PeerState::kClosed;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? PeerState::kQuiet : PeerState::kClosed;
  }
}

Status WaitReady(int fd, short events, SteadyTime deadline) {
  while (true) {
    pollfd pfd{fd, events, 0};
    int rc = ::poll(&pfd, 1, RemainingMs(deadline));
    if (rc > 0) return Status::Ok();
    if (rc == 0) return Status(StatusCode::kTimeout, "no answer from Redis in time");
    if (errno != EINTR) {
      return Status(StatusCode::kIo, std::string("poll: ") + std::strerror(errno));
    }
  }
}

StatusOr<UniqueFd> ConnectEndpoint(const config::RedisEndpoint& endpoint, SteadyTime deadline) {
  const std::string where = endpoint.Describe();
  if (endpoint.kind == config::RedisEndpoint::Kind::kUnix) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
      return Status(StatusCode::kIo, std::string("socket: ") + std::strerror(errno));
    }
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (endpoint.path.size() >= sizeof(address.sun_path)) {
      return Status(StatusCode::kInvalid, "unix socket path is too long: " + endpoint.path);
    }
    std::memcpy(address.sun_path, endpoint.path.c_str(), endpoint.path.size() + 1);
    auto s = ConnectFd(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address), deadline);
    if (!s.ok()) return Status(s.code(), "cannot connect to " + where + ": " + s.message());
    return fd;
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
    return fd;
  }
  return Status(last.code(), "cannot connect to " + where + ": " + last.message());
}

}  // namespace streamcar::redis
