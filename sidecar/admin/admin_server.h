#pragma once
// The admin HTTP server: GET /healthz, /readyz, /metrics on one port (SPEC section 5).
//
// It must answer the kubelet's probes within 1 s whatever other clients of the port do (idle,
// trickling or half-open connections), so it is event-driven rather than thread-per-connection:
// one thread polls the listener and every connection, all non-blocking. No client can hold the
// thread: each request must arrive whole within kRequestTimeout of the connection's start (or of
// the previous answer), a request head is bounded to kMaxRequestBytes, answers are written as the
// socket takes them, and past kMaxConnections the connection idle the longest is closed to make
// room. Only GET is served; HEAD and every other method get 405 on every path.
//
// Threads: Start and Stop are called by one owner thread; the handlers run on the server's own
// thread and must be thread-safe.

#include <functional>
#include <string>
#include <thread>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"

namespace streamcar::admin {

struct AdminHandlers {
  std::function<std::string()> wedged_loop;    // "" while healthy
  std::function<std::string()> why_not_ready;  // "" while ready
  std::function<std::string()> metrics_text;
};

class AdminServer {
 public:
  // The most bytes of one request (request line, headers and any body) the server reads.
  static constexpr size_t kMaxRequestBytes = 4096;
  // Open connections at most; a new one beyond it closes the one idle the longest.
  static constexpr size_t kMaxConnections = 256;
  // A request must arrive whole within this time (slow senders do not extend it); an idle
  // keep-alive connection is closed after it too.
  static constexpr Millis kRequestTimeout{5000};
  // An answer must be taken by the client within this time.
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
  struct Connection;
  class Loop;

  AdminHandlers handlers_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace streamcar::admin
