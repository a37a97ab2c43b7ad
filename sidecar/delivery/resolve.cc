#include "sidecar/delivery/resolve.h"

#include <netdb.h>
#include <sys/un.h>

#include <cstddef>
#include <cstring>
#include <memory>

namespace streamcar::delivery {

Status ResolveFailure(const std::string& host, const std::string& origin, std::string_view reason) {
  return Status(StatusCode::kIo,
                "cannot resolve " + host + " (" + origin + "): " + std::string(reason));
}

StatusOr<std::vector<ResolvedAddress>> ResolveHost(const std::string& host, int port,
                                                   const std::string& origin) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return ResolveFailure(host, origin, gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  std::vector<ResolvedAddress> resolved;
  for (const addrinfo* ai = addresses.get(); ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    ResolvedAddress address;
    address.family = ai->ai_family;
    std::memcpy(&address.storage, ai->ai_addr, ai->ai_addrlen);
    address.length = ai->ai_addrlen;
    resolved.push_back(address);
  }
  if (resolved.empty()) {
    return ResolveFailure(host, origin, "no address");
  }
  return resolved;
}

StatusOr<std::vector<ResolvedAddress>> UnixSocketAddress(const std::string& path) {
  sockaddr_un address{};
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return Status(StatusCode::kInvalid, "not a Unix socket path: \"" + path + "\"");
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  ResolvedAddress resolved;
  resolved.family = AF_UNIX;
  std::memcpy(&resolved.storage, &address, sizeof(address));
  resolved.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return std::vector<ResolvedAddress>{resolved};
}

}  // namespace streamcar::delivery
