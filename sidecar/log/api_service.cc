#include "sidecar/log/api_service.h"

#include <string>
#include <utility>

#include "sidecar/http/json_error.h"

namespace streamcar::log {

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
    workers_->Submit(std::move(work));
  }
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
