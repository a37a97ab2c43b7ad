#pragma once
// What the log API answers (SPEC section 10), apart from the sockets and threads that carry it
// (api_server.cc): authentication, routing, appends, window reads and the SSE follow loop.

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/http/request.h"
#include "sidecar/log/api_response.h"
#include "sidecar/log/api_server.h"
#include "sidecar/log/api_sessions.h"
#include "sidecar/log/api_token.h"
#include "sidecar/log/follow_hub.h"
#include "sidecar/log/producer.h"

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
  // path, the stream, the method and the declared body size. An answer here is sent instead of
  // reading the body (and the connection is then closed if a body was announced).
  std::optional<ApiResponse> Screen(const ApiRequest& request, ApiRoute* route);

  // Answers a whole request. A follow request streams its events on `fd` and returns nullopt
  // once the follower ends (the connection is then closed).
  std::optional<ApiResponse> Handle(const ApiRequest& request, ApiRoute route, int fd);

  // Counts one answer in streamcar_api_requests_total.
  void Count(ApiRoute route, int status);

  // Checks Redis on the server's probe session (PING, or a connect when it has none), so the
  // shared RedisHealth (readiness, streamcar_redis_up) is true to Redis even while no request
  // comes: a sidecar with streams only has no other connection. Called about once a second, from
  // one thread.
  void Probe();

  // Ends every follower (their Handle calls return) and refuses new ones.
  void Stop();

 private:
  struct Stream {
    config::LogStream config;
    Producer producer;
  };

  ArchiveStore* ArchiveOf(const Stream& stream) const;
  const Stream* Find(const std::string& name) const;
  ApiResponse Produce(const ApiRequest& request, const Stream& stream);
  ApiResponse Read(const ApiRequest& request, const Stream& stream);
  std::optional<ApiResponse> Follow(const ApiRequest& request, const Stream& stream, int fd);
  // The SSE loop of a follow whose 200 head is sent: `entries` (the first page), then each page
  // the follower gives, until the API stops, the peer leaves or the follower ends.
  void StreamEvents(Follower& follower, std::vector<StreamEntry> entries, int fd);
  ApiResponse Unavailable(const Status& status, int retry_after) const;
  // The answer to a failed read or follow: 400, 503 (an outage, with Retry-After) or 500.
  ApiResponse ReadFailure(const Status& status) const;

  config::ApiConfig api_;
  ApiServerDeps deps_;
  std::map<std::string, std::unique_ptr<Stream>> streams_;
  std::unique_ptr<TokenFile> token_;
  SessionPool sessions_;
  redis::Session probe_;
  FollowHub hub_;
  std::atomic<size_t> followers_{0};
  std::atomic<bool> stopping_{false};
};

// Whether a GET asks for the SSE follow: follow=true in the query or Accept: text/event-stream.
bool WantsFollow(const ApiRequest& request,
                 const std::vector<std::pair<std::string, std::string>>& query);

}  // namespace streamcar::log
