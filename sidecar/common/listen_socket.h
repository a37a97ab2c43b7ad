#pragma once
// The listening socket of the admin server and the log API: one way to bind "host:port".

#include <string>

#include "sidecar/common/status.h"

namespace streamcar {

// Binds and listens on `listen` ("127.0.0.1:9464", "[::1]:9464", ":9464"; port 0 picks a free
// one): a non-blocking, close-on-exec socket, or kFatal naming `setting` (e.g. "admin.listen")
// and why it cannot be bound.
StatusOr<int> ListenTcp(const std::string& listen, const std::string& setting);

// The port a bound socket listens on.
int BoundPort(int fd);

// True when a bound socket is reachable from this host only (127.0.0.0/8, ::1, or ::ffff:127.x):
// what a server without credentials may safely listen on.
bool BoundToLoopback(int fd);

}  // namespace streamcar
