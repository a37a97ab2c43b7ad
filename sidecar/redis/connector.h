#pragma once
// Opens connections off the loop. The loop never blocks, but opening a connection does: DNS,
// TCP connect, the TLS handshake, AUTH/SELECT/PING/CLIENT SETNAME. The connector runs the
// existing blocking Connection::Open (so every error text stays as the CLI and the tests know
// it) on a transient thread, then hands the live transport to the loop.
//
// Threads: Open may be called from any thread; `done` runs on the loop. Destroy the connector
// before its loop: the destructor waits for the openings still running (each bounded by its
// connect timeout); their `done` is posted to the loop as usual, so a caller that may be gone by
// then guards its callback (AsyncConnection holds a weak lifeline).

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "sidecar/common/event_loop.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/transport.h"

namespace streamcar::redis {

struct OpenedConnection {
  std::unique_ptr<Transport> transport;
  std::optional<int64_t> client_id;  // CLIENT ID (for CLIENT UNBLOCK); none if the ACL refuses it
  std::optional<keys::NodeAddress> node;  // the node the topology chose (cluster, sentinel)
};

class Connector {
 public:
  explicit Connector(EventLoop& loop) : loop_(loop) {}
  ~Connector();
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  // Opens a Redis connection as Connection::Open does (kFatal: authentication refused, an
  // untrusted certificate; kIo/kTimeout: worth retrying), asks its CLIENT ID, and posts
  // `done` with the transport to the loop.
  void OpenRedis(ConnectionOptions options, std::function<void(StatusOr<OpenedConnection>)> done);

  // The general form: `work` runs on a transient thread and returns what the loop then runs.
  void RunOffLoop(std::function<std::function<void()>()> work);

  // Openings running now.
  size_t running() const;

 private:
  EventLoop& loop_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  size_t running_ = 0;  // guarded by mutex_
};

}  // namespace streamcar::redis
