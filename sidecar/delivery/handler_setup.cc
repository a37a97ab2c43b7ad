#include "sidecar/delivery/handler_setup.h"

#include <optional>
#include <utility>

#include "sidecar/delivery/routes.h"

namespace streamcar::delivery {

StatusOr<std::unique_ptr<Http1Client>> MakeHandlerClient(EventLoop& loop,
                                                         const config::Subscription& sub) {
  const config::HandlerConfig& handler = sub.handler;
  // Every url of the handler goes over the socket when one is set: one app behind it.
  const auto target = [&](const std::string& url) {
    return ViaUnixSocket(SplitUrl(url), handler.unix_socket);
  };
  std::optional<HttpTarget> health;
  if (!handler.health_url.empty()) health = target(handler.health_url);
  const RouteTable routes(sub);
  auto client = Http1Client::Create(loop, target(routes.targets().front()), std::move(health),
                                    static_cast<size_t>(handler.concurrency));
  if (!client.ok()) return client.status();
  for (size_t i = 1; i < routes.targets().size(); ++i) {
    if (Status s = (*client)->AddTarget(target(routes.targets()[i])); !s.ok()) return s;
  }
  auto auth = RequestAuth::Create(handler.auth, loop.clock().Now());
  if (!auth.ok()) return auth.status();
  (*client)->SetAuth(std::move(*auth));
  return client;
}

}  // namespace streamcar::delivery
