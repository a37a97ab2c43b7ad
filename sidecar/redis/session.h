#pragma once
// A connection that comes back: reconnects with capped exponential backoff and jitter, reports
// up/down to a shared RedisHealth, and turns an authentication refusal into kFatal. One owning
// thread per Session, like the Connection inside it.

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "sidecar/common/stop_signal.h"
#include "sidecar/redis/connection.h"

namespace streamcar::redis {

// Shared by all sessions of the process: Redis is "up" while no session is disconnected.
class RedisHealth {
 public:
  bool up() const { return down_sessions_.load() == 0 && ever_connected_.load(); }
  void MarkDown() { down_sessions_.fetch_add(1); }
  void MarkUp() {
    down_sessions_.fetch_sub(1);
    ever_connected_ = true;
  }

 private:
  std::atomic<int> down_sessions_{0};
  std::atomic<bool> ever_connected_{false};
};

class Session {
 public:
  Session(ConnectionOptions options, std::string role, RedisHealth* health);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Returns once connected; retries with backoff meanwhile. kFatal when Redis refuses our
  // credentials (retrying cannot fix it), kCancelled when `stop` was requested.
  Status EnsureConnected(StopSignal& stop);
  // One connection attempt (no waiting); Ok when already connected. For loops that must keep
  // serving other work between attempts. Returns the delay to wait before the next attempt in
  // *retry_in on failure.
  Status ConnectOnce(Millis* retry_in);

  // Like Connection's, but never on a broken connection: I/O failures drop it, and the next call
  // after EnsureConnected uses a fresh one.
  StatusOr<Reply> Run(const Command& command);
  StatusOr<Reply> RunBlocking(const Command& command, Millis server_block);
  StatusOr<std::vector<Reply>> RunPipeline(const std::vector<Command>& commands);

  bool connected() const { return connection_ != nullptr; }
  // Counts the connections made: per-connection state (loaded scripts) is stale when it moves.
  uint64_t generation() const { return generation_; }
  const std::string& role() const { return role_; }

 private:
  template <typename T>
  StatusOr<T> Track(StatusOr<T> result);
  void Drop();

  ConnectionOptions options_;
  std::string role_;
  RedisHealth* health_;
  std::unique_ptr<Connection> connection_;
  bool counted_down_ = false;
  int failures_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace streamcar::redis
