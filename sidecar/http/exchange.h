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
  // Held while posting to `loop`, so the server (and its loop) cannot go meanwhile.
  std::mutex mutex;
  // Null once the server is destroyed; set under `mutex`. Read under it by posters, and without
  // it by what runs on the loop (the server is destroyed on its loop's thread or while the loop
  // does not run, so that read races with nothing, and a posted answer does not wait for a
  // worker that holds the mutex while it posts).
  std::atomic<Server*> server{nullptr};
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
