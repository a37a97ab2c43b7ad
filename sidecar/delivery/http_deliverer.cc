#include "sidecar/delivery/http_deliverer.h"

#include <httplib.h>

namespace streamcar::delivery {

HttpTarget SplitUrl(const std::string& url) {
  HttpTarget target;
  const size_t scheme_end = url.find("://");
  const size_t path_start = url.find_first_of("/?#", scheme_end + 3);
  target.origin = url.substr(0, path_start);
  target.path = path_start == std::string::npos ? "/" : url.substr(path_start);
  if (!target.path.empty() && target.path[0] != '/') target.path = "/" + target.path;
  return target;
}

HttpDeliverer::HttpDeliverer(const std::string& url, Millis timeout)
    : target_(SplitUrl(url)),
      timeout_(timeout),
      client_(std::make_unique<httplib::Client>(target_.origin)) {
  client_->set_tcp_nodelay(true);
  client_->set_keep_alive(true);
  // The handler is in the same pod: a connect that takes long means it is not listening.
  client_->set_connection_timeout(std::min(timeout, Millis(2000)));
  client_->set_read_timeout(timeout);
  client_->set_write_timeout(timeout);
}

HttpDeliverer::~HttpDeliverer() = default;

HandlerResponse HttpDeliverer::Post(const HttpRequest& request) {
  httplib::Headers headers;
  for (const auto& [name, value] : request.headers) headers.emplace(name, value);
  const auto started = SteadyClock::now();
  auto result = client_->Post(target_.path, headers, request.body, request.content_type);
  HandlerResponse response;
  if (result) {
    response.kind = HandlerResponse::Kind::kAnswered;
    response.status = result->status;
    response.body = std::move(result->body);
    if (result->has_header("Retry-After"))
      response.retry_after = result->get_header_value("Retry-After");
    return response;
  }
  const auto error = result.error();
  response.error = httplib::to_string(error);
  switch (error) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
      response.kind = HandlerResponse::Kind::kRefused;
      break;
    default:
      // A read that ran out its time is a timeout; a read or write that failed early was a reset.
      response.kind = SteadyClock::now() - started >= timeout_ * 95 / 100
                          ? HandlerResponse::Kind::kTimeout
                          : HandlerResponse::Kind::kError;
      if (response.kind == HandlerResponse::Kind::kTimeout) {
        response.error = "no answer within " + std::to_string(timeout_.count()) + "ms";
      }
      break;
  }
  return response;
}

bool HttpDeliverer::Get() {
  auto result = client_->Get(target_.path);
  return result && result->status >= 200 && result->status < 300;
}

}  // namespace streamcar::delivery
