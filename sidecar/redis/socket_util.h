#pragma once
// Socket plumbing shared by the plain and the TLS transports: waiting for readiness against a
// deadline, and a non-blocking connect to an endpoint.

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/common/unique_fd.h"
#include "sidecar/config/redis_url.h"

namespace streamcar::redis {

// Waits until `fd` is ready for `events` (POLLIN / POLLOUT); kTimeout past the deadline.
Status WaitReady(int fd, short events, SteadyTime deadline);

// What a non-blocking peek at a connected socket finds, consuming nothing.
enum class PeerState { kQuiet, kBytesWaiting, kClosed };  // kClosed: end of stream or a reset
PeerState PeekPeer(int fd);

// A connected non-blocking socket to the endpoint (TCP with TCP_NODELAY and keepalive, or a unix
// socket), or why not.
StatusOr<UniqueFd> ConnectEndpoint(const config::RedisEndpoint& endpoint, SteadyTime deadline);

}  // namespace streamcar::redis
