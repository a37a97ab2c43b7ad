#include "sidecar/log/api_server.h"

#include <atomic>
#include <thread>
#include <utility>

#include "sidecar/common/event_loop.h"
#include "sidecar/common/log.h"
#include "sidecar/http/server.h"
#include "sidecar/http/worker_pool.h"
#include "sidecar/log/api_endpoints.h"
#include "sidecar/log/api_service.h"

namespace streamcar::log {

class ApiServer::Impl {
 public:
  Impl(config::ApiConfig api, const std::vector<config::LogStream>& streams,
       const ApiServerDeps& deps)
      : api_(std::move(api)), endpoints_(api_, streams, deps) {}

  ~Impl() { Stop(); }

  Status Start() {
    auto loop = EventLoop::Create(SystemClock::Instance());
    if (!loop.ok()) return Status(StatusCode::kFatal, "api server: " + loop.status().message());
    loop_ = std::move(*loop);
    workers_ = std::make_unique<http::WorkerPool>(kWorkers);
    prober_ = std::make_unique<http::WorkerPool>(1);
    endpoints_.Attach(loop_.get());
    service_ =
        std::make_unique<ApiService>(&endpoints_, workers_.get(), loop_.get(), api_.max_body);
    server_ = std::make_unique<http::Server>(loop_.get(), Options(), service_.get());
    if (Status s = server_->Listen(api_.listen, "api.listen"); !s.ok()) {
      Stop();
      return s;
    }
    port_ = server_->port();
    if (api_.token_file.empty() && !server_->bound_to_loopback()) {
      // Without a token anyone who reaches the address may append and read (README, "Log API").
      LogWarn(
          "api.listen is reachable from other hosts and api.token_file is not set: any client "
          "that reaches it may append to and read every configured stream",
          {{"listen", api_.listen}});
    }
    probe_timer_ = loop_->CreateTimer([this] {
      ProbeSoon();
      probe_timer_->ArmIn(kProbeInterval);
    });
    ProbeSoon();
    probe_timer_->ArmIn(kProbeInterval);
    thread_ = std::thread([this] { loop_->Run(); });
    return Status::Ok();
  }

  void Stop() {
    if (loop_ == nullptr) return;
    loop_->Stop();
    if (thread_.joinable()) thread_.join();
    // The loop no longer runs: the server goes first (a late answer finds it gone), then the
    // followers and the workers that may still answer, then the loop.
    probe_timer_.reset();
    server_.reset();
    endpoints_.Detach();  // the appends waiting go unanswered: their connections are gone
    endpoints_.Stop();
    if (workers_) workers_->Stop();
    if (prober_) prober_->Stop();
    service_.reset();
    workers_.reset();
    prober_.reset();
    loop_.reset();
  }

  int port() const { return port_; }

 private:
  http::ServerOptions Options() const {
    http::ServerOptions options;
    options.name = "api server";
    options.max_head_bytes = kMaxHeadBytes;
    options.max_body = api_.max_body;
    options.max_connections = kMaxConnections;
    // With a token, a connection that has not shown it gets little time: connections without
    // it must not hold the cap that clients with it need. Without one nobody is vouched for.
    const bool token = !api_.token_file.empty();
    options.head_timeout = token ? kUnauthenticatedTimeout : kRequestTimeout;
    options.unauthenticated_idle_timeout = token ? kUnauthenticatedTimeout : kIdleTimeout;
    options.request_timeout = kRequestTimeout;
    options.idle_timeout = kIdleTimeout;
    options.write_timeout = kWriteTimeout;
    options.linger_timeout = kLingerTimeout;
    return options;
  }

  // The probe blocks on Redis for up to its timeouts: on its own thread, one at a time.
  void ProbeSoon() {
    if (probing_.exchange(true)) return;
    prober_->Submit([this] {
      endpoints_.Probe();
      probing_ = false;
    });
  }

  config::ApiConfig api_;
  ApiEndpoints endpoints_;
  int port_ = 0;
  std::atomic<bool> probing_{false};
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<http::WorkerPool> workers_;
  std::unique_ptr<http::WorkerPool> prober_;
  std::unique_ptr<ApiService> service_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<EventLoop::Timer> probe_timer_;
  std::thread thread_;
};

ApiServer::ApiServer(config::ApiConfig api, const std::vector<config::LogStream>& streams,
                     const ApiServerDeps& deps)
    : impl_(std::make_unique<Impl>(std::move(api), streams, deps)) {}

ApiServer::~ApiServer() { Stop(); }

Status ApiServer::Start() { return impl_->Start(); }

void ApiServer::Stop() { impl_->Stop(); }

int ApiServer::port() const { return impl_->port(); }

}  // namespace streamcar::log
