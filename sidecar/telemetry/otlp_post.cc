#include "sidecar/telemetry/otlp_post.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "sidecar/common/unique_fd.h"
#include "sidecar/delivery/resolve.h"

namespace streamcar::telemetry {
namespace {

// A collector's status line and headers are short; more is not an OTLP answer.
constexpr size_t kMaxAnswerHead = size_t{64} * 1024;

// Milliseconds left until `deadline` (0 when past), for poll.
int MillisLeft(SteadyTime deadline) {
  const auto left = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 60'000));
}

// Waits for `events` on `fd` until `deadline`; false when it passed first.
bool WaitFor(int fd, short events, SteadyTime deadline) {
  for (;;) {
    pollfd watched{fd, events, 0};
    const int ready = ::poll(&watched, 1, MillisLeft(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return false;
  }
}

StatusOr<UniqueFd> Connect(const delivery::HttpTarget& target, SteadyTime deadline) {
  auto addresses = delivery::ResolveHost(target.host, target.port, target.origin);
  if (!addresses.ok()) return addresses.status();
  std::string last_error = "no address";
  for (const auto& address : *addresses) {
    UniqueFd fd(::socket(address.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) ==
        0) {
      return fd;
    }
    if (errno != EINPROGRESS) {
      last_error = std::strerror(errno);
      continue;
    }
    if (!WaitFor(fd.get(), POLLOUT, deadline))
      return Status(StatusCode::kTimeout, "connect timed out");
    int error = 0;
    socklen_t length = sizeof(error);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error == 0) return fd;
    last_error = std::strerror(error);
  }
  return Status(StatusCode::kIo, "connect to " + target.origin + ": " + last_error);
}

Status SendAll(int fd, std::string_view bytes, SteadyTime deadline) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      bytes.remove_prefix(static_cast<size_t>(sent));
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitFor(fd, POLLOUT, deadline)) return {StatusCode::kTimeout, "sending timed out"};
      continue;
    }
    return {StatusCode::kIo, std::string("send: ") + std::strerror(errno)};
  }
  return Status::Ok();
}

// Reads until the status line and headers are in; the body does not matter to the exporter.
StatusOr<int> ReadStatus(int fd, SteadyTime deadline) {
  std::string head;
  char buffer[4096];
  while (head.find("\r\n\r\n") == std::string::npos) {
    if (head.size() > kMaxAnswerHead)
      return Status(StatusCode::kProtocol, "answer headers too long");
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got > 0) {
      head.append(buffer, static_cast<size_t>(got));
      continue;
    }
    if (got == 0) break;  // closed: what arrived may still hold a status line
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!WaitFor(fd, POLLIN, deadline)) return Status(StatusCode::kTimeout, "answer timed out");
      continue;
    }
    return Status(StatusCode::kIo, std::string("recv: ") + std::strerror(errno));
  }
  // "HTTP/1.1 200 OK"
  if (!head.starts_with("HTTP/1.") || head.size() < 12 || head[8] != ' ') {
    return Status(StatusCode::kProtocol, "malformed answer");
  }
  int status = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (head[i] < '0' || head[i] > '9') return Status(StatusCode::kProtocol, "malformed status");
    status = status * 10 + (head[i] - '0');
  }
  return status;
}

}  // namespace

StatusOr<int> PostExport(const delivery::HttpTarget& target, std::string_view body,
                         SteadyTime deadline) {
  auto fd = Connect(target, deadline);
  if (!fd.ok()) return fd.status();
  std::string request =
      "POST " + target.path + " HTTP/1.1\r\nHost: " + target.authority +
      "\r\nContent-Type: application/x-protobuf\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n";
  request.append(body);
  if (Status sent = SendAll(fd->get(), request, deadline); !sent.ok()) return sent;
  return ReadStatus(fd->get(), deadline);
}

}  // namespace streamcar::telemetry
