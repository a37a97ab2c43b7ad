#pragma once
// The log API's Redis connections for single appends (append_group.h): event-loop connections on
// the API server's loop, so a group goes out and its answers come back without leaving the loop.
// One per key slot with a topology (Redis Cluster: each follows its slot's master through MOVED,
// ASK and failovers, as the runtime's connections do; Sentinel: the current master), one for every
// key without. Each loads the append script as it connects.
//
// Threads: the loop's thread (or while the loop does not run).

#include <map>
#include <memory>
#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/common/event_loop.h"
#include "sidecar/redis/async_connection.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/connector.h"

namespace streamcar::log {

class AppendLinks {
 public:
  // While a connection is down an append is answered 503 at once, so its reconnect backoff is
  // capped at the Retry-After the API suggests: Redis's return is noticed within about that.
  static constexpr Millis kReconnectCap{1000};

  AppendLinks(EventLoop* loop, redis::ConnectionOptions options);
  ~AppendLinks();
  AppendLinks(const AppendLinks&) = delete;
  AppendLinks& operator=(const AppendLinks&) = delete;

  // The connection that appends to stream key `key`, connecting when first asked for.
  redis::AsyncConnection& For(const std::string& key);

  EventLoop& loop() { return *loop_; }
  // How long one call may take (redis.command_timeout).
  Millis command_timeout() const { return options_.command_timeout; }
  // How long an append may wait for a connection that is connecting or following its slot.
  Millis connect_timeout() const { return options_.connect_timeout; }

 private:
  EventLoop* loop_;
  redis::ConnectionOptions options_;
  redis::Connector connector_;  // outlives the connections (its destructor waits for openings)
  std::map<int, std::unique_ptr<redis::AsyncConnection>> by_slot_;  // -1: without a topology
};

}  // namespace streamcar::log
