#include "sidecar/admin/admin_server.h"

#include <httplib.h>

namespace streamcar::admin {

AdminServer::AdminServer(AdminHandlers handlers)
    : handlers_(std::move(handlers)), server_(std::make_unique<httplib::Server>()) {}

AdminServer::~AdminServer() { Stop(); }

Status AdminServer::Start(const std::string& listen) {
  auto colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const int port = std::stoi(listen.substr(colon + 1));

  auto& server = *server_;
  server.set_tcp_nodelay(true);
  // Bounded requests: the admin port answers three small GETs and nothing else.
  server.set_payload_max_length(4096);
  server.set_read_timeout(std::chrono::seconds(5));
  server.set_write_timeout(std::chrono::seconds(5));
  server.set_keep_alive_max_count(100);
  server.new_task_queue = [] { return new httplib::ThreadPool(2); };

  server.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    const std::string wedged = handlers_.wedged_loop();
    res.status = wedged.empty() ? 200 : 503;
    res.set_content(wedged.empty() ? "ok\n" : "wedged: " + wedged + "\n", "text/plain");
  });
  server.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    const std::string why = handlers_.why_not_ready();
    res.status = why.empty() ? 200 : 503;
    res.set_content(why.empty() ? "ready\n" : "not ready: " + why + "\n", "text/plain");
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(handlers_.metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  auto method_not_allowed = [](const httplib::Request&, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", "GET");
    res.set_content("only GET is served here\n", "text/plain");
  };
  server.Post(".*", method_not_allowed);
  server.Put(".*", method_not_allowed);
  server.Delete(".*", method_not_allowed);
  server.Patch(".*", method_not_allowed);

  if (!server.bind_to_port(host.c_str(), port)) {
    return Status(StatusCode::kFatal,
                  "cannot listen on admin.listen " + listen + " (address in use or not available)");
  }
  port_ = port;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return Status::Ok();
}

void AdminServer::Stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

}  // namespace streamcar::admin
