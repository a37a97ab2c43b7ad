#include "sidecar/log/api_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace streamcar::log {
namespace {

int MillisUntil(SteadyTime deadline) {
  const auto left = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1'000'000));
}

bool WaitFor(int fd, short events, SteadyTime deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, MillisUntil(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return true;  // let the read or write report the error
  }
}

}  // namespace

ReadResult ReadSome(int fd, std::string* in, size_t limit, SteadyTime deadline) {
  char buffer[16384];
  while (true) {
    if (!WaitFor(fd, POLLIN, deadline)) return ReadResult::kTimeout;
    const ssize_t n = ::recv(fd, buffer, std::min(limit, sizeof(buffer)), MSG_DONTWAIT);
    if (n > 0) {
      in->append(buffer, static_cast<size_t>(n));
      return ReadResult::kData;
    }
    if (n == 0) return ReadResult::kClosed;
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    return ReadResult::kClosed;
  }
}

bool SendAll(int fd, std::string_view data, SteadyTime deadline) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n =
        ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitFor(fd, POLLOUT, deadline)) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool PeerGone(int fd) {
  char buffer[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) continue;
    if (n == 0) return true;
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

void CloseGracefully(int fd, Millis linger) {
  ::shutdown(fd, SHUT_WR);
  const SteadyTime deadline = SteadyClock::now() + linger;
  std::string scratch;
  while (true) {
    scratch.clear();
    if (ReadSome(fd, &scratch, 16384, deadline) != ReadResult::kData) break;
  }
  ::close(fd);
}

}  // namespace streamcar::log
