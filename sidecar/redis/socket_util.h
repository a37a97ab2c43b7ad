#pragma once
// Socket plumbing shared by the plain and the TLS transports: an owned file descriptor, waiting
// for readiness against a deadline, and a non-blocking connect to an endpoint.

#include <utility>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/config/redis_url.h"

namespace streamcar::redis {

// Owns one file descriptor.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Waits until `fd` is ready for `events` (POLLIN / POLLOUT); kTimeout past the deadline.
Status WaitReady(int fd, short events, SteadyTime deadline);

// A connected non-blocking socket to the endpoint (TCP with TCP_NODELAY and keepalive, or a unix
// socket), or why not.
StatusOr<UniqueFd> ConnectEndpoint(const config::RedisEndpoint& endpoint, SteadyTime deadline);

}  // namespace streamcar::redis
