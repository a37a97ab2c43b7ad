#pragma once
// One blocking HTTP/1.1 GET, for a question asked once at start (the app's GET /dapr/subscribe,
// SPEC 11) — not for deliveries, which go through the event-loop client (http_client.h). Framing
// is the same strict codec (http1_codec.h), and the transport the same as the client's: plain TCP,
// or the target's Unix socket (handler.unix_socket: the app may listen on nothing else). Any
// thread; blocks up to `timeout`.

#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/delivery/http1_codec.h"
#include "sidecar/delivery/http_target.h"

namespace streamcar::delivery {

// GETs `target` (http:// only; over target.unix_socket when set) with `headers` besides Host and
// User-Agent, and returns the answer, whatever its status. kIo when the connection cannot be
// made or breaks, kTimeout past `timeout`, kProtocol for a malformed answer, kInvalid for an
// https:// target or a header that would break framing.
StatusOr<http1::Response> HttpGet(const HttpTarget& target, const http1::HeaderList& headers,
                                  Millis timeout);

}  // namespace streamcar::delivery
