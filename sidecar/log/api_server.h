#pragma once
// The log API server (SPEC section 10) on api.listen: POST and GET /v1/streams/{name}/entries and
// their Server-Sent Events follow. docs/api.md is the reference; docs/api-server.md says why the
// server is built this way.
//
// One thread per connection, bounded: a request that waits on Redis blocks only its own
// connection, and a follower (SSE) holds one thread for as long as it follows. Followers are
// capped below the connection cap (kMaxFollowers < kMaxConnections), so followers can never take
// the threads that POSTs and GETs need; past either cap the answer is 503 with Retry-After.
// Every request must arrive whole within kRequestTimeout of its first byte, its head within
// kMaxHeadBytes, its body within api.max_body (413 before reading it); a new connection that
// sends nothing within kRequestTimeout, and an idle keep-alive connection after kIdleTimeout, is
// closed; an answer must be taken within kWriteTimeout.
//
// Redis work uses the server's own sessions (a pool of kSessions), never a subscription's; all
// followers share one FollowHub, so each followed stream costs one blocking read however many
// follow it. Redis down: 503 with Retry-After, within the connect and command timeouts.

#include <memory>
#include <string>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/session.h"

namespace streamcar::admin {
class Metrics;
}

namespace streamcar::log {

class ArchiveStore;

struct ApiServerDeps {
  redis::ConnectionOptions redis;
  redis::RedisHealth* health = nullptr;
  ArchiveStore* archive = nullptr;  // null: streams are read from Redis only
  admin::Metrics* metrics = nullptr;
};

class ApiServer {
 public:
  static constexpr size_t kMaxHeadBytes = size_t{16} * 1024;
  static constexpr size_t kMaxConnections = 512;
  static constexpr size_t kMaxFollowers = 384;
  static constexpr int kSessions = 16;
  static constexpr Millis kRequestTimeout{10000};
  static constexpr Millis kIdleTimeout{60000};
  static constexpr Millis kWriteTimeout{10000};
  // How long a request waits for a free Redis session before 503.
  static constexpr Millis kSessionWait{2000};
  // SSE: a comment line this often keeps proxies from closing an idle stream (SPEC 10).
  static constexpr Millis kKeepAliveInterval{15000};

  ApiServer(config::ApiConfig api, const std::vector<config::LogStream>& streams,
            const ApiServerDeps& deps);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds api.listen and starts serving; kFatal when the address cannot be bound.
  Status Start();
  // Stops accepting, ends every follower and connection, and joins every thread.
  void Stop();
  int port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamcar::log
