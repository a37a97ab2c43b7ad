#pragma once
// The log API (SPEC section 10) as a service of the inbound HTTP server (http/service.h): the head
// is screened on the server's loop (token, Origin, route, stream, method, declared size), and a
// whole request is taken on the loop. A single append queues to its stream's group commit, which
// the loop sends and answers itself (append_group.h); every other answer waits on Redis and is
// given on a worker thread. Every answer, the server's own refusals included, is counted in
// streamcar_api_requests_total.
//
// The work of the requests read in one round of the loop is handed to the workers together, at
// the end of the round (one wake-up of the pool for the round).
//
// Threads: Screen, Handle and Refusal on the server's loop thread; the work Handle submits on the
// worker pool.

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "sidecar/common/event_loop.h"
#include "sidecar/http/service.h"
#include "sidecar/http/worker_pool.h"
#include "sidecar/log/api_endpoints.h"

namespace streamcar::log {

class ApiService final : public http::Service {
 public:
  // All borrowed; they outlive the service and the server that calls it; `loop` is the server's.
  // `max_body` is api.max_body, named in the server's 413.
  ApiService(ApiEndpoints* endpoints, http::WorkerPool* workers, EventLoop* loop,
             uint64_t max_body);

  Screening Screen(const http::Request& head) override;
  void Handle(http::Request request, http::Responder responder) override;
  http::Response Refusal(int status, std::string_view message) const override;

 private:
  // Hands this round's work to the workers.
  void SubmitRound();

  ApiEndpoints* endpoints_;
  http::WorkerPool* workers_;
  uint64_t max_body_;
  std::vector<std::function<void()>> round_;        // the work of this round of the loop
  std::unique_ptr<EventLoop::Timer> end_of_round_;  // due at once: fires after the round's reads
};

}  // namespace streamcar::log
