#include "sidecar/log/api_service.h"

#include <string>
#include <utility>

#include "sidecar/http/json_error.h"

namespace streamcar::log {

ApiService::ApiService(ApiEndpoints* endpoints, http::WorkerPool* workers, EventLoop* loop,
                       uint64_t max_body)
    : endpoints_(endpoints),
      workers_(workers),
      max_body_(max_body),
      end_of_round_(loop->CreateTimer([this] { SubmitRound(); })) {}

http::Service::Screening ApiService::Screen(const http::Request& head) {
  Screening screening;
  ApiRoute route = ApiRoute::kOther;
  screening.answer = endpoints_->Screen(head, &route, &screening.authenticated);
  if (screening.answer) endpoints_->Count(route, screening.answer->status);
  return screening;
}

void ApiService::Handle(http::Request request, http::Responder responder) {
  const ApiRoute route = RouteOf(request);
  if (auto work = endpoints_->Handle(std::move(request), route, std::move(responder))) {
    // A timer due now fires after the loop has dispatched every ready connection of this round.
    if (round_.empty()) end_of_round_->ArmIn(Millis(0));
    round_.push_back(std::move(work));
  }
}

void ApiService::SubmitRound() {
  std::vector<std::function<void()>> round;
  round.swap(round_);
  for (auto& work : round) workers_->Submit(std::move(work));
}

http::Response ApiService::Refusal(int status, std::string_view message) const {
  endpoints_->Count(ApiRoute::kOther, status);
  // The server refuses a body over its max_body (api.max_body) itself, a chunked one included.
  http::Response refusal = http::JsonError(
      status, status == 413
                  ? "request body over api.max_body (" + std::to_string(max_body_) + " bytes)"
                  : std::string(message));
  // The server is full: worth trying again soon, when a connection has gone.
  if (status == 503) refusal.headers.emplace_back("Retry-After", "1");
  return refusal;
}

}  // namespace streamcar::log
