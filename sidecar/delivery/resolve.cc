#include "sidecar/delivery/resolve.h"

#include <netdb.h>

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

}  // namespace streamcar::delivery
