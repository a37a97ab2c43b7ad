#pragma once
// What an inbound HTTP server serves: a Service answers each request it is handed, now or later,
// with one Response or with an event stream, through the request's Responder.
//
// Threads: Screen and Handle run on the server's loop thread and must not block (a Redis call
// belongs on a worker thread: http/worker_pool.h). A Responder may be used from any thread; what
// it is given is posted to the loop, in order, and dropped when the connection is already gone.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sidecar/http/request.h"
#include "sidecar/http/response.h"

namespace streamcar::http {

// One exchange's way back to its connection. Copyable; every copy is the same exchange.
class Responder {
 public:
  struct Exchange;  // shared with the server (server.cc)
  explicit Responder(std::shared_ptr<Exchange> exchange) : exchange_(std::move(exchange)) {}

  // The answer. Once per exchange, and not after StartStream.
  void Respond(Response response) const;
  // The answer, written now: for code running on the server's own loop thread outside the
  // service's Handle (a callback of a connection on that loop), which saves the post and the
  // wake-up. Handle itself answers with Respond.
  void RespondOnLoop(Response response) const;
  // An event stream instead: `head` is sent without a length (its body, if any, right after the
  // head), then every Send, until Finish; the connection closes after the stream.
  void StartStream(Response head) const;
  void Send(std::string bytes) const;
  void Finish() const;

  // Stream bytes handed to Send that the client has not taken yet: what a producer must bound.
  size_t queued_bytes() const;
  // True once the connection is gone (the client left, a deadline passed, the server stopped):
  // nothing more will be sent.
  bool gone() const;

 private:
  std::shared_ptr<Exchange> exchange_;
};

class Service {
 public:
  virtual ~Service() = default;

  struct Screening {
    // An answer from the head alone (401, 404, 405, 413 ...): the body is not read, and when one
    // was announced the connection closes after the answer.
    std::optional<Response> answer;
    // The request carried valid credentials: the connection is the last to be evicted at the
    // connection cap and gets the full head deadline.
    bool authenticated = false;
  };
  // Loop thread, once a head is parsed (before its body is read).
  virtual Screening Screen(const Request& head) = 0;
  // Loop thread, with the whole request. Must not block; answers through `responder`.
  virtual void Handle(Request request, Responder responder) = 0;
  // The answer the server itself gives for a request it refuses (400, 408, 413, 431, 505, 503).
  virtual Response Refusal(int status, std::string_view message) const = 0;
};

}  // namespace streamcar::http
