#pragma once
// The handler client of one subscription as its configuration describes it (SPEC 3, 11): where
// requests go (handler.url, each route's url in RouteTable's order, health_url; over TCP, or all
// of them over handler.unix_socket: the socket is the app's) and what each carries
// to prove where it comes from (handler.auth). The composition root of a subscription's loop
// calls it; the pieces are http_client.h, http_target.h and request_auth.h.

#include <memory>

#include "sidecar/common/event_loop.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/delivery/http_client.h"

namespace streamcar::delivery {

// On the loop's thread or before the loop runs. Fails when an https:// target's trust store
// cannot be loaded or the token file holds no usable token now.
StatusOr<std::unique_ptr<Http1Client>> MakeHandlerClient(EventLoop& loop,
                                                         const config::Subscription& sub);

}  // namespace streamcar::delivery
