#pragma once
// The handler client: one HTTP/1.1 exchange at a time over one kept-alive connection (plain TCP
// with TCP_NODELAY, DESIGN.md trap 7, or TLS verified against the system trust store), framed by
// http1_codec. Not thread-safe: each delivery worker owns its own HttpDeliverer.
//
// Strict matching (SPEC 3.1): an answer is only ever taken for the request just sent. Anything
// else on the connection (bytes after a complete answer, an answer that arrives before the request
// was fully written, bytes or EOF on an idle kept-alive connection, a malformed answer) closes the
// connection, and the request being carried counts as failed (kError: a retry).
//
// Time: handler.timeout bounds the whole exchange, from the moment Post is called (connecting
// included) to the last byte of the answer; a handler that trickles its answer is cut off at the
// deadline (kTimeout). Connecting alone is also capped at 2 s: a handler in the same pod that does
// not accept quickly is not listening (kRefused, not an attempt).

#include <memory>
#include <string>
#include <string_view>

#include "sidecar/common/clock.h"
#include "sidecar/delivery/encoder.h"
#include "sidecar/delivery/http1_codec.h"
#include "sidecar/delivery/http_target.h"
#include "sidecar/delivery/outcome.h"

namespace streamcar::delivery {

class HttpDeliverer {
 public:
  HttpDeliverer(const std::string& url, Millis timeout);
  ~HttpDeliverer();
  HttpDeliverer(const HttpDeliverer&) = delete;
  HttpDeliverer& operator=(const HttpDeliverer&) = delete;

  HandlerResponse Post(const HttpRequest& request);
  // GET for the health_url probe: true on a 2xx answer.
  bool Get();

  // One connection per HttpDeliverer; how many it has opened so far (for tests and debugging).
  int connections_opened() const { return connections_opened_; }

  class Connection;  // the byte pipe: plain socket or TLS (defined in the .cc)

 private:
  HandlerResponse Exchange(std::string_view method, const HttpRequest* request);
  HandlerResponse Fail(HandlerResponse::Kind kind, std::string error);

  HttpTarget target_;
  Millis timeout_;
  std::unique_ptr<Connection> connection_;
  int connections_opened_ = 0;
  http1::ResponseParser parser_;
  std::string out_;
  std::string in_;
};

}  // namespace streamcar::delivery
