#pragma once
// What a Responder shares with its server (http/server.cc, http/responder.cc): private to the
// http folder.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "sidecar/common/event_loop.h"
#include "sidecar/http/service.h"

namespace streamcar::http {

class Server;

struct ServerLink {
  std::mutex mutex;
  Server* server = nullptr;  // guarded by mutex; null once the server is destroyed
  EventLoop* loop = nullptr;
};

struct Responder::Exchange {
  std::shared_ptr<ServerLink> link;
  uint64_t connection_id = 0;
  uint64_t id = 0;  // which exchange of the connection: a late answer to an old one is dropped
  std::atomic<size_t> queued{0};
  std::atomic<bool> gone{false};
};

}  // namespace streamcar::http
