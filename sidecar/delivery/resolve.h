#pragma once
// Name resolution of a handler URL's host. getaddrinfo blocks (DNS, /etc/hosts, nsswitch), so the
// handler client never calls it on its event loop: it runs a Resolver on a transient thread
// (http_client_connect.cc) unless the host is an IP literal, which resolves without any I/O.

#include <sys/socket.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/common/status.h"

namespace streamcar::delivery {

struct ResolvedAddress {
  int family = AF_UNSPEC;
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// The addresses of `host`:`port`, in getaddrinfo's order; kIo "cannot resolve <host> (<origin>):
// <reason>" when there are none. Any thread; may block.
using Resolver = std::function<StatusOr<std::vector<ResolvedAddress>>(
    const std::string& host, int port, const std::string& origin)>;

// The failure every resolution reports, whatever went wrong (getaddrinfo, a timeout, no thread):
// kIo "cannot resolve <host> (<origin>): <reason>".
Status ResolveFailure(const std::string& host, const std::string& origin, std::string_view reason);

// The address of the Unix socket at `path` (handler.unix_socket, SPEC 11): no resolution, no I/O.
// kInvalid when the path does not fit a socket address (the loader refuses such a path).
StatusOr<std::vector<ResolvedAddress>> UnixSocketAddress(const std::string& path);

// The system's resolver (getaddrinfo, TCP addresses of any family).
StatusOr<std::vector<ResolvedAddress>> ResolveHost(const std::string& host, int port,
                                                   const std::string& origin);

}  // namespace streamcar::delivery
