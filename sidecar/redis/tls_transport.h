#pragma once
// TLS to Redis (rediss://) with OpenSSL over our own socket: the server's certificate verified
// against redis.tls.ca_file or the system trust store, the name checked (redis.tls.server_name,
// default the URL's host; an IP address is checked as one), SNI sent for names, and a client
// certificate for mutual TLS. With verify: false nothing is checked (the caller warns loudly).

#include <memory>

#include "sidecar/config/config.h"
#include "sidecar/redis/socket_util.h"
#include "sidecar/redis/transport.h"

namespace streamcar::redis {

// Performs the handshake on a connected socket before `deadline`. An untrusted or misnamed
// certificate, an unreadable certificate or key, or a server that refuses the handshake is kFatal
// (retrying cannot fix it); a connection that drops is kIo.
StatusOr<std::unique_ptr<Transport>> StartTls(UniqueFd fd, const config::RedisEndpoint& endpoint,
                                              const config::TlsConfig& tls, SteadyTime deadline);

}  // namespace streamcar::redis
