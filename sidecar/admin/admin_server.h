#pragma once
// The admin HTTP server: GET /healthz, /readyz, /metrics on one port (SPEC section 5). It runs
// on its own thread; everything it reads is thread-safe.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "sidecar/common/status.h"

namespace httplib {
class Server;
}

namespace streamcar::admin {

struct AdminHandlers {
  std::function<std::string()> wedged_loop;    // "" while healthy
  std::function<std::string()> why_not_ready;  // "" while ready
  std::function<std::string()> metrics_text;
};

class AdminServer {
 public:
  explicit AdminServer(AdminHandlers handlers);
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds `listen` ("host:port", "[::]:port") and starts serving; kFatal when the address cannot
  // be bound.
  Status Start(const std::string& listen);
  void Stop();
  int port() const { return port_; }

 private:
  AdminHandlers handlers_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace streamcar::admin
