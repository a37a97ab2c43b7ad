#pragma once
// One blocking HTTP/1.1 GET over plain TCP, for a question asked once at start (the app's
// GET /dapr/subscribe, SPEC 11) — not for deliveries, which go through the event-loop client
// (http_client.h). Framing is the same strict codec (http1_codec.h). Any thread; blocks up to
// `timeout`.

#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/delivery/http1_codec.h"

namespace streamcar::delivery {

// GETs `url` (http:// only) and returns the answer, whatever its status. kIo when the
// connection cannot be made or breaks, kTimeout past `timeout`, kProtocol for a malformed
// answer, kInvalid for an https:// url.
StatusOr<http1::Response> HttpGet(const std::string& url, Millis timeout);

}  // namespace streamcar::delivery
