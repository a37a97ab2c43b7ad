#pragma once
// What the log API answers (SPEC section 10), apart from the server that carries it
// (api_service.cc, api_server.cc): authentication, origins, routing, appends, window reads, and
// the start of an SSE follow (its events are carried by a FollowPump).

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/event_loop.h"
#include "sidecar/http/request.h"
#include "sidecar/http/response.h"
#include "sidecar/http/service.h"
#include "sidecar/log/api_server.h"
#include "sidecar/log/api_sessions.h"
#include "sidecar/log/api_token.h"
#include "sidecar/log/append_group.h"
#include "sidecar/log/append_links.h"
#include "sidecar/log/follow_hub.h"
#include "sidecar/log/follow_pump.h"
#include "sidecar/log/producer.h"

namespace prometheus {
class Counter;
}

namespace streamcar::log {

// A parsed request (the one request parser is http/request.h).
using ApiRequest = http::Request;

// The route label of streamcar_api_requests_total.
enum class ApiRoute { kProduce, kRead, kFollow, kOther };
const char* RouteName(ApiRoute route);

class ApiEndpoints {
 public:
  ApiEndpoints(const config::ApiConfig& api, const std::vector<config::LogStream>& streams,
               const ApiServerDeps& deps);

  // What can be decided from the head alone, before a byte of the body is read: the token, the
  // Origin, the path, the stream, the method and the declared body size. An answer here is sent
  // instead of reading the body (and the connection is then closed if a body was announced; after
  // a 401 it is closed in any case). *authenticated: a valid token was presented.
  std::optional<http::Response> Screen(const ApiRequest& request, ApiRoute* route,
                                       bool* authenticated);

  // Takes a whole request on the server's loop and returns what must wait on Redis, to run on a
  // worker thread, which answers through `responder` and counts the answer. Returns an empty
  // function when nothing is left to run: the answer went out, or a single append queued to its
  // stream's group commit (append_group.h), which answers it on the loop. A follow request,
  // once its start and first page are read, becomes an event stream carried by the follow pump.
  [[nodiscard]] std::function<void()> Handle(ApiRequest request, ApiRoute route,
                                             http::Responder responder);

  // What the requests handed to the workers and not yet started may hold together (their bodies
  // and heads): a client that resets its connection frees its connection slot at once while its
  // request still waits, so the connection cap alone does not bound them while Redis is slow.
  static constexpr size_t kMaxWaitingBytes = size_t{64} << 20;

  // Counts one answer in streamcar_api_requests_total.
  void Count(ApiRoute route, int status);

  // Checks Redis on the server's probe session (PING, or a connect when it has none), so the
  // shared RedisHealth (readiness, streamcar_redis_up) is true to Redis even while no request
  // comes: a sidecar with streams only has no other connection. Called about once a second, from
  // one thread.
  void Probe();

  // Ends every follower and refuses new ones.
  void Stop();

  // The server's loop, where single appends are sent (append_group.h): from Attach, before the
  // server serves, to Detach, once the loop no longer runs.
  void Attach(EventLoop* loop);
  void Detach();

 private:
  struct Stream {
    Stream(const config::LogStream& stream, const config::ApiConfig& api)
        : config(stream), producer(stream, api.idempotency_ttl, api.max_future_skew) {}
    config::LogStream config;
    Producer producer;
    // Single appends, committed in groups on the server's loop (append_group.h); from Attach to
    // Detach.
    std::unique_ptr<AppendGroup> appends;
    // streamcar_produced_total of this stream (null without metrics): looked up once, not per
    // append (a lookup takes the registry's locks and builds the labels).
    prometheus::Counter* produced = nullptr;
  };

  ArchiveStore* ArchiveOf(const Stream& stream) const;
  const Stream* Find(const std::string& name) const;
  std::optional<http::Response> ScreenStream(const ApiRequest& request, ApiRoute* route);
  // The part of Handle that blocks on Redis (on a worker).
  void HandleOnWorker(const ApiRequest& request, ApiRoute route, const Stream& stream,
                      const http::Responder& responder);
  http::Response Answer(const ApiRequest& request, ApiRoute route, const Stream& stream);
  // A single append, on the loop: refused at once, or queued to the stream's group commit, which
  // answers it on the loop.
  void ProduceOne(const ApiRequest& request, const Stream& stream,
                  const http::Responder& responder);
  // A batch append (a JSON array), on a worker.
  http::Response Produce(const ApiRequest& request, const Stream& stream);
  // The answer once Redis has decided a POST's appends (or could not be asked).
  http::Response Appended(const StatusOr<std::vector<AppendResult>>& results, bool batch,
                          int retry_after, const Stream& stream);
  http::Response Read(const ApiRequest& request, const Stream& stream);
  // A follow: the answer when it cannot start (sent by the caller), else nullopt once the event
  // stream is started and handed to the pump.
  std::optional<http::Response> Follow(const ApiRequest& request, const Stream& stream,
                                       const http::Responder& responder);
  http::Response Unavailable(const Status& status, int retry_after) const;
  // The answer to a failed read or follow: 400, 503 (an outage, with Retry-After) or 500.
  http::Response ReadFailure(const Status& status) const;

  config::ApiConfig api_;
  ApiServerDeps deps_;
  std::atomic<size_t> waiting_bytes_{0};  // of the requests handed to the workers, not yet started
  std::map<std::string, std::unique_ptr<Stream>> streams_;
  std::unique_ptr<TokenFile> token_;
  SessionPool sessions_;
  std::unique_ptr<AppendLinks> append_links_;  // from Attach to Detach
  redis::Session probe_;
  FollowHub hub_;
  FollowPump pump_;
  std::atomic<size_t> followers_{0};
  std::atomic<bool> stopping_{false};
  // streamcar_api_requests_total of the answers each route can give, looked up once (Count runs
  // per request, on several threads; the map is not changed after the constructor).
  std::map<std::pair<ApiRoute, int>, prometheus::Counter*> requests_;
};

// The route of a request that passed Screen.
ApiRoute RouteOf(const ApiRequest& request);

// Whether a GET asks for the SSE follow: follow=true in the query or Accept: text/event-stream.
bool WantsFollow(const ApiRequest& request,
                 const std::vector<std::pair<std::string, std::string>>& query);

}  // namespace streamcar::log
