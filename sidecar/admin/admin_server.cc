#include "sidecar/admin/admin_server.h"

#include <string_view>
#include <utility>

#include "sidecar/common/event_loop.h"
#include "sidecar/http/server.h"
#include "sidecar/http/service.h"
#include "sidecar/http/worker_pool.h"

namespace streamcar::admin {
namespace {

http::Response Text(int status, std::string body) {
  http::Response response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

}  // namespace

class AdminServer::Service final : public http::Service {
 public:
  Service(const AdminHandlers& handlers, http::WorkerPool* metrics_worker)
      : handlers_(handlers), metrics_worker_(metrics_worker) {}

  Screening Screen(const http::Request& head) override {
    Screening screening;
    if (head.method != "GET") {
      http::Response refused = Text(405, "only GET is served here\n");
      refused.headers.emplace_back("Allow", "GET");
      refused.close = true;
      screening.answer = std::move(refused);
    }
    return screening;
  }

  void Handle(http::Request request, http::Responder responder) override {
    // The query string, if any, is ignored.
    if (request.path == "/healthz") {
      const std::string wedged = handlers_.wedged_loop();
      responder.Respond(wedged.empty() ? Text(200, "ok\n") : Text(503, "wedged: " + wedged + "\n"));
    } else if (request.path == "/readyz") {
      const std::string why = handlers_.why_not_ready();
      responder.Respond(why.empty() ? Text(200, "ready\n") : Text(503, "not ready: " + why + "\n"));
    } else if (request.path == "/metrics") {
      metrics_worker_->Submit([this, responder] {
        http::Response metrics = Text(200, handlers_.metrics_text());
        metrics.content_type = "text/plain; version=0.0.4; charset=utf-8";
        responder.Respond(std::move(metrics));
      });
    } else {
      responder.Respond(Text(404, "not found: /healthz, /readyz and /metrics are served here\n"));
    }
  }

  http::Response Refusal(int status, std::string_view message) const override {
    return Text(status, std::string(message) + "\n");
  }

 private:
  const AdminHandlers& handlers_;
  http::WorkerPool* metrics_worker_;
};

AdminServer::AdminServer(AdminHandlers handlers) : handlers_(std::move(handlers)) {}

AdminServer::~AdminServer() { Stop(); }

Status AdminServer::Start(const std::string& listen) {
  auto loop = EventLoop::Create(SystemClock::Instance());
  if (!loop.ok()) return Status(StatusCode::kFatal, "admin server: " + loop.status().message());
  loop_ = std::move(*loop);
  metrics_worker_ = std::make_unique<http::WorkerPool>(1);
  service_ = std::make_unique<Service>(handlers_, metrics_worker_.get());
  http::ServerOptions options;
  options.name = "admin server";
  options.max_head_bytes = kMaxRequestBytes;
  options.max_body = kMaxRequestBytes;
  options.max_connections = kMaxConnections;
  options.head_timeout = kRequestTimeout;
  options.unauthenticated_idle_timeout = kRequestTimeout;
  options.idle_timeout = kRequestTimeout;
  options.request_timeout = kRequestTimeout;
  options.write_timeout = kWriteTimeout;
  options.linger_timeout = kLingerTimeout;
  server_ = std::make_unique<http::Server>(loop_.get(), options, service_.get());
  if (Status s = server_->Listen(listen, "admin.listen"); !s.ok()) {
    Stop();
    return s;
  }
  port_ = server_->port();
  thread_ = std::thread([this] { loop_->Run(); });
  return Status::Ok();
}

void AdminServer::Stop() {
  if (loop_ == nullptr) return;
  loop_->Stop();
  if (thread_.joinable()) thread_.join();
  // The loop no longer runs: the server is destroyed here, before the worker it may hear from
  // (a late answer finds it gone), and before its loop.
  server_.reset();
  if (metrics_worker_) metrics_worker_->Stop();
  service_.reset();
  metrics_worker_.reset();
  loop_.reset();
}

}  // namespace streamcar::admin
