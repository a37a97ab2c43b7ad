#pragma once
// POSTs requests to the handler over one keep-alive connection (TCP_NODELAY: DESIGN.md trap 7).
// Not thread-safe: each delivery worker owns its own HttpDeliverer.

#include <memory>
#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/delivery/encoder.h"
#include "sidecar/delivery/outcome.h"

namespace httplib {
class Client;
}

namespace streamcar::delivery {

struct HttpTarget {
  std::string origin;  // scheme://host:port
  std::string path;    // "/orders" (with any query)
};
HttpTarget SplitUrl(const std::string& url);

class HttpDeliverer {
 public:
  HttpDeliverer(const std::string& url, Millis timeout);
  ~HttpDeliverer();
  HttpDeliverer(const HttpDeliverer&) = delete;
  HttpDeliverer& operator=(const HttpDeliverer&) = delete;

  HandlerResponse Post(const HttpRequest& request);
  // GET for the health_url probe: true on a 2xx answer.
  bool Get();

 private:
  HttpTarget target_;
  Millis timeout_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace streamcar::delivery
