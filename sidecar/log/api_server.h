#pragma once
// The log API server (SPEC section 10) on api.listen: POST and GET /v1/streams/{name}/entries and
// their Server-Sent Events follow. docs/api.md is the reference; docs/architecture.md counts the
// threads.
//
// A service (log/api_service.h) on the inbound HTTP server (http/server.h), built like the admin
// server: one loop thread carries every connection, so its threads do not grow with connections.
// Single appends are sent from that loop too (append_group.h). The other requests that wait on
// Redis run on kWorkers worker threads, each with its own Redis session;
// followers (SSE) are carried by kPumpThreads pump threads (log/follow_pump.h) and share one
// FollowHub, so each followed stream costs one blocking read however many follow it. Followers are
// capped below the connection cap (kMaxFollowers < kMaxConnections); past the follower cap the
// answer is 503 with Retry-After. Bounds: a head of kMaxHeadBytes, a body of api.max_body (413
// before reading it), a whole request within kRequestTimeout of its first byte, an answer taken
// within kWriteTimeout, an idle keep-alive connection closed after kIdleTimeout. With a token
// file, a connection that has not presented the token gets kUnauthenticatedTimeout to send its
// head and to idle, and is the first evicted at the connection cap.
//
// Redis work uses the server's own sessions, never a subscription's. Redis down: 503 with
// Retry-After, within the connect and command timeouts. A probe checks Redis every kProbeInterval
// on a thread of its own, for readiness.

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
  // Threads that answer batch POSTs and GET (and start follows), and the Redis sessions they use.
  static constexpr int kWorkers = 8;
  static constexpr int kSessions = kWorkers;
  // Threads that carry the followers' events.
  static constexpr int kPumpThreads = 2;
  static constexpr Millis kRequestTimeout{10000};
  static constexpr Millis kIdleTimeout{60000};
  static constexpr Millis kWriteTimeout{10000};
  // With api.token_file: how long a connection that has not presented the token may take to send
  // its head or stay idle, so that connections without it cannot hold the connection cap.
  static constexpr Millis kUnauthenticatedTimeout{2000};
  // How long unread input is drained after an answer that closes the connection.
  static constexpr Millis kLingerTimeout{1000};
  // How long a request waits for a free Redis session before 503.
  static constexpr Millis kSessionWait{2000};
  // SSE: a comment line this often keeps proxies from closing an idle stream (SPEC 10).
  static constexpr Millis kKeepAliveInterval{15000};
  static constexpr Millis kProbeInterval{1000};

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
