#pragma once
// The delivery seam: how the runtime hands a request to the application's handler and learns what
// came back, without knowing about sockets or HTTP framing (delivery/http_client.h is the HTTP/1.1
// implementation; a test may put a fake behind it).
//
// Threads: loop thread only (the EventLoop the implementation was made with), including
// destruction.
//
// Callbacks: every `done` runs exactly once, on the loop, and never inside the call that passed
// it, so a caller may Send again (or destroy what the callback captured) from inside `done`.
// The one exception is Abandon() (and destroying the client): the callbacks not yet run are
// dropped, never run.

#include <cstddef>
#include <functional>

#include "sidecar/common/clock.h"
#include "sidecar/delivery/encoder.h"
#include "sidecar/delivery/outcome.h"

namespace streamcar::delivery {

class HandlerClient {
 public:
  // kAnswered (an HTTP status arrived) | kRefused (could not connect: not an attempt) |
  // kTimeout (no whole answer within the timeout) | kError (broken or malformed exchange).
  using Done = std::function<void(HandlerResponse)>;

  virtual ~HandlerClient() = default;

  // POSTs `request` to the handler URL; `timeout` bounds the whole exchange (connecting,
  // writing, reading). False, and `done` is dropped, when every connection is busy
  // (free_slots() == 0).
  virtual bool Send(HttpRequest&& request, Millis timeout, Done done) = 0;
  // GETs the health URL (the handler URL when none is configured): true for a 2xx answer
  // within `timeout`, false for anything else. Does not take one of the request slots.
  virtual void Probe(Millis timeout, std::function<void(bool healthy)> done) = 0;
  // How many more requests Send accepts now: concurrency minus the requests outstanding.
  virtual size_t free_slots() const = 0;
  // Past the drain deadline: closes every connection at once; no pending `done` will run.
  virtual void Abandon() = 0;
};

}  // namespace streamcar::delivery
