#include "sidecar/delivery/http_get.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sidecar/common/unique_fd.h"
#include "sidecar/common/version.h"
#include "sidecar/delivery/http_target.h"
#include "sidecar/delivery/resolve.h"

namespace streamcar::delivery {
namespace {

int RemainingMs(SteadyTime deadline) {
  const auto left = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Waits until `fd` is ready for `events` or the deadline passes (false).
bool WaitFor(int fd, short events, SteadyTime deadline) {
  pollfd entry{fd, events, 0};
  for (;;) {
    const int ready = poll(&entry, 1, RemainingMs(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return false;
  }
}

// A non-blocking socket connected to the first address that accepts: the target's Unix socket
// when it names one, as the handler client connects (resolve.h), else the host's addresses.
StatusOr<UniqueFd> Connect(const HttpTarget& target, SteadyTime deadline) {
  auto addresses = target.unix_socket.empty() ? ResolveHost(target.host, target.port, target.origin)
                                              : UnixSocketAddress(target.unix_socket);
  if (!addresses.ok()) return addresses.status();
  std::string last_error = "no address";
  for (const auto& address : *addresses) {
    UniqueFd fd(socket(address.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) ==
        0) {
      return fd;
    }
    if (errno != EINPROGRESS) {
      last_error = std::strerror(errno);
      continue;
    }
    if (!WaitFor(fd.get(), POLLOUT, deadline)) {
      return Status(StatusCode::kTimeout, "connecting to " + target.origin + " timed out");
    }
    int error = 0;
    socklen_t length = sizeof(error);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error == 0) return fd;
    last_error = std::strerror(error);
  }
  return Status(StatusCode::kIo, "cannot connect to " + target.origin + ": " + last_error);
}

Status SendAll(int fd, const std::string& bytes, SteadyTime deadline, const std::string& origin) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && WaitFor(fd, POLLOUT, deadline)) {
      continue;
    }
    if (RemainingMs(deadline) == 0) {
      return {StatusCode::kTimeout, "sending to " + origin + " timed out"};
    }
    return {StatusCode::kIo, "sending to " + origin + " failed: " + std::strerror(errno)};
  }
  return Status::Ok();
}

StatusOr<http1::Response> ReadAnswer(int fd, SteadyTime deadline, const std::string& origin) {
  http1::ResponseParser parser;
  char buffer[16384];
  while (!parser.complete()) {
    if (parser.failed()) {
      return Status(StatusCode::kProtocol, origin + " answered badly: " + parser.error());
    }
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      parser.Feed(std::string_view(buffer, static_cast<size_t>(n)));
      continue;
    }
    if (n == 0) {
      parser.FeedEof();
      if (parser.failed()) {
        return Status(StatusCode::kIo, origin + " closed the connection without a whole answer");
      }
      continue;
    }
    if (errno == EINTR) continue;
    if ((errno == EAGAIN || errno == EWOULDBLOCK) && WaitFor(fd, POLLIN, deadline)) continue;
    if (RemainingMs(deadline) == 0) {
      return Status(StatusCode::kTimeout, origin + " did not answer in time");
    }
    return Status(StatusCode::kIo, "reading from " + origin + " failed: " + std::strerror(errno));
  }
  return std::move(parser.response());
}

}  // namespace

StatusOr<http1::Response> HttpGet(const HttpTarget& target, const http1::HeaderList& headers,
                                  Millis timeout) {
  if (target.tls) {
    return Status(StatusCode::kInvalid, "https is not supported here: " + target.origin);
  }
  const SteadyTime deadline = SteadyClock::now() + timeout;
  auto fd = Connect(target, deadline);
  if (!fd.ok()) return fd.status();
  static const std::string user_agent = std::string("streamcar/") + kVersion;
  http1::RequestHead head;
  head.method = "GET";
  const std::string request_target = target.path.empty() ? "/" : target.path;
  head.target = request_target;
  head.authority = target.authority;
  head.user_agent = user_agent;
  head.headers = &headers;
  std::string request;
  if (Status s = http1::SerializeRequest(head, "", &request); !s.ok()) return s;
  if (Status s = SendAll(fd->get(), request, deadline, target.origin); !s.ok()) return s;
  return ReadAnswer(fd->get(), deadline, target.origin);
}

}  // namespace streamcar::delivery
