#pragma once
// The admin HTTP server: GET /healthz, /readyz, /metrics on one port (SPEC section 5), a service
// on the inbound HTTP server (http/server.h) with a loop thread of its own.
//
// It must answer the kubelet's probes within 1 s whatever other clients of the port do (idle,
// trickling, half-open or non-reading connections): the server never blocks on a client, bounds
// every request (a head of kMaxRequestBytes, kRequestTimeout from its first byte), evicts the
// quietest idle connection past kMaxConnections, and /metrics, the one answer that costs, is
// rendered on a worker thread of its own, so a burst of scrapes never delays a probe. Only GET is
// served; HEAD and every other method get 405 on every path.
//
// Threads: Start and Stop are called by one owner thread; the handlers run on the server's
// threads (the probes on its loop, metrics_text on its worker) and must be thread-safe.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"

namespace streamcar {
class EventLoop;
}
namespace streamcar::http {
class Server;
class WorkerPool;
}  // namespace streamcar::http

namespace streamcar::admin {

struct AdminHandlers {
  std::function<std::string()> wedged_loop;    // "" while healthy
  std::function<std::string()> why_not_ready;  // "" while ready
  std::function<std::string()> metrics_text;
};

class AdminServer {
 public:
  // The most bytes of one request head (request line and headers), and of a body, it reads.
  static constexpr size_t kMaxRequestBytes = 4096;
  // Open connections at most; a new one beyond it closes an idle one (the quietest first).
  static constexpr size_t kMaxConnections = 256;
  // A request must arrive whole within this time of its first byte (slow senders do not extend
  // it); a new connection must start its request, and an idle keep-alive connection its next
  // one, within it too.
  static constexpr Millis kRequestTimeout{5000};
  // An answer must keep being taken by the client within this time.
  static constexpr Millis kWriteTimeout{5000};
  // After answering a request that must close the connection, its unread input is drained this
  // long at most, so the answer is not destroyed by a reset.
  static constexpr Millis kLingerTimeout{1000};

  explicit AdminServer(AdminHandlers handlers);
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds `listen` ("host:port", "[::]:port", ":port"; port 0 picks a free one) and starts
  // serving; kFatal when the address cannot be bound.
  Status Start(const std::string& listen);
  void Stop();
  // The bound port (after Start).
  int port() const { return port_; }

 private:
  class Service;

  AdminHandlers handlers_;
  int port_ = 0;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<http::WorkerPool> metrics_worker_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<http::Server> server_;
  std::thread thread_;
};

}  // namespace streamcar::admin
