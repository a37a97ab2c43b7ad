#include "sidecar/log/api_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "sidecar/common/listen_socket.h"
#include "sidecar/common/log.h"
#include "sidecar/http/request.h"
#include "sidecar/log/api_endpoints.h"
#include "sidecar/log/api_response.h"
#include "sidecar/log/api_socket.h"

namespace streamcar::log {
namespace {

using http::ChunkedState;
using http::DecodeChunked;
using http::FindHeadEnd;
using http::HeadProblem;
using http::ParseRequestHead;

// How long unread input is drained after an answer that closes the connection.
constexpr Millis kLinger{1000};
// How long Stop lets connections finish the answer they are writing before it shuts them down
// both ways (a follower or a client that does not read would otherwise hold Stop for up to
// kWriteTimeout).
constexpr Millis kStopGrace{2000};
// A chunked body may carry this much framing beyond api.max_body before it is refused.
constexpr size_t kChunkedOverhead = size_t{64} * 1024;

}  // namespace

class ApiServer::Impl {
 public:
  Impl(config::ApiConfig api, const std::vector<config::LogStream>& streams,
       const ApiServerDeps& deps)
      : api_(std::move(api)), endpoints_(api_, streams, deps) {}

  ~Impl() { Stop(); }

  Status Start() {
    auto fd = ListenTcp(api_.listen, "api.listen");
    if (!fd.ok()) return fd.status();
    listen_fd_ = *fd;
    port_ = BoundPort(listen_fd_);
    if (api_.token_file.empty() && !BoundToLoopback(listen_fd_)) {
      // Without a token anyone who reaches the address may append and read (README, "Log API").
      LogWarn(
          "api.listen is reachable from other hosts and api.token_file is not set: any client "
          "that reaches it may append to and read every configured stream",
          {{"listen", api_.listen}});
    }
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
      ::close(listen_fd_);
      listen_fd_ = -1;
      return Status(StatusCode::kFatal,
                    std::string("api server: eventfd: ") + std::strerror(errno));
    }
    acceptor_ = std::thread([this] { AcceptLoop(); });
    prober_ = std::thread([this] {
      std::unique_lock lock(probe_mutex_);
      while (!probe_stop_) {
        lock.unlock();
        endpoints_.Probe();
        lock.lock();
        probe_wake_.wait_for(lock, Millis(1000), [&] { return probe_stop_; });
      }
    });
    return Status::Ok();
  }

  void Stop() {
    if (prober_.joinable()) {
      {
        std::lock_guard lock(probe_mutex_);
        probe_stop_ = true;
      }
      probe_wake_.notify_all();
      prober_.join();
    }
    if (acceptor_.joinable()) {
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
      acceptor_.join();
    }
    stopping_ = true;
    endpoints_.Stop();  // followers return
    std::map<uint64_t, std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      // Wake every connection thread blocked waiting for a request; one that is answering
      // finishes its answer (the write side stays open) and then ends.
      for (const auto& [id, fd] : open_fds_) ::shutdown(fd, SHUT_RD);
    }
    {
      std::unique_lock lock(mutex_);
      if (!connection_ended_.wait_for(lock, kStopGrace, [&] { return open_fds_.empty(); })) {
        for (const auto& [id, fd] : open_fds_) ::shutdown(fd, SHUT_RDWR);
      }
      threads.swap(threads_);
    }
    for (auto& [id, thread] : threads) thread.join();
    JoinFinished();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
    listen_fd_ = -1;
    wake_fd_ = -1;
  }

  int port() const { return port_; }

 private:
  void AcceptLoop() {
    while (true) {
      pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      const int ready = ::poll(fds, 2, 1000);
      JoinFinished();
      if (ready < 0 && errno != EINTR) {
        LogError("api server: poll failed", {{"error", std::strerror(errno)}});
        return;
      }
      if (ready > 0 && (fds[0].revents & POLLIN) != 0) return;
      if (ready > 0 && (fds[1].revents & POLLIN) != 0) AcceptSome();
    }
  }

  void AcceptSome() {
    for (int i = 0; i < 64; ++i) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          LogError("api server: accept failed", {{"error", std::strerror(errno)}});
        }
        return;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      std::lock_guard lock(mutex_);
      if (threads_.size() >= kMaxConnections) {
        // Full: say so without a thread (the answer fits any socket buffer) and close.
        ApiResponse busy = ApiResponse::Error(503, "too many connections");
        busy.headers.emplace_back("Retry-After", "1");
        busy.close = true;
        [[maybe_unused]] bool sent =
            SendAll(fd, SerializeResponse(busy), SteadyClock::now() + Millis(10));
        ::close(fd);
        endpoints_.Count(ApiRoute::kOther, 503);
        continue;
      }
      const uint64_t id = next_id_++;
      open_fds_[id] = fd;
      threads_[id] = std::thread([this, id, fd] {
        const bool graceful = Serve(fd);
        {
          // Out of open_fds_ before the descriptor is closed: Stop must never shut down a
          // number that a new connection reuses.
          std::lock_guard inner(mutex_);
          open_fds_.erase(id);
        }
        connection_ended_.notify_all();
        if (graceful) {
          CloseGracefully(fd, kLinger);
        } else {
          ::close(fd);
        }
        std::lock_guard inner(mutex_);
        finished_.push_back(id);
      });
    }
  }

  void JoinFinished() {
    std::vector<std::thread> done;
    {
      std::lock_guard lock(mutex_);
      for (uint64_t id : finished_) {
        auto it = threads_.find(id);
        if (it == threads_.end()) continue;
        done.push_back(std::move(it->second));
        threads_.erase(it);
      }
      finished_.clear();
    }
    for (auto& thread : done) thread.join();
  }

  // Answers `response` (counted under `route`) and says whether the connection stays open.
  bool Answer(int fd, const ApiResponse& response, ApiRoute route) {
    endpoints_.Count(route, response.status);
    return SendAll(fd, SerializeResponse(response), SteadyClock::now() + kWriteTimeout) &&
           !response.close;
  }

  // One connection: requests one after another (keep-alive, pipelining) until either side ends
  // it, a deadline passes or the server stops. True when the close must be graceful (an answer
  // was just sent and the client may still be sending).
  bool Serve(int fd) {
    std::string in;
    bool graceful = false;
    // A new connection must start its request within kRequestTimeout: only a client that has
    // been answered may idle for kIdleTimeout, so silent connections cannot hold the threads.
    Millis idle = kRequestTimeout;
    while (!stopping_) {
      ApiRequest request;
      ApiRoute route = ApiRoute::kOther;
      std::optional<ApiResponse> refusal;
      const ReadOutcome outcome = ReadRequest(fd, idle, &in, &request, &route, &refusal);
      idle = kIdleTimeout;
      if (outcome == ReadOutcome::kGone) break;
      if (outcome == ReadOutcome::kRefused) {
        refusal->close = true;
        Answer(fd, *refusal, route);
        graceful = true;
        break;
      }
      std::optional<ApiResponse> response;
      if (outcome == ReadOutcome::kEarly) {
        response = std::move(refusal);
      } else {
        response = endpoints_.Handle(request, route, fd);
      }
      if (!response) break;  // a follower: the event stream ended, and the connection with it
      // After HEAD (always 405 here) the client reads no body, so the connection cannot go on.
      response->close =
          response->close || !request.keep_alive || request.method == "HEAD" || stopping_;
      if (!Answer(fd, *response, route)) {
        graceful = true;
        break;
      }
    }
    return graceful;
  }

  // kEarly: answered from the head alone (no body to skip), the connection may go on.
  enum class ReadOutcome { kRequest, kEarly, kRefused, kGone };

  // Reads one whole request into *request (leaving pipelined bytes in *in); a connection that
  // sends nothing for `idle` is gone. kRefused with the
  // answer in *refusal when the request is refused (the connection then closes); kGone when the
  // client left, idled out or the server stops.
  ReadOutcome ReadRequest(int fd, Millis idle, std::string* in, ApiRequest* request,
                          ApiRoute* route, std::optional<ApiResponse>* refusal) {
    std::optional<SteadyTime> deadline;
    size_t head_end = 0;
    if (auto outcome = ReadHead(fd, idle, in, &head_end, &deadline, refusal)) return *outcome;
    if (head_end > kMaxHeadBytes) {
      *refusal =
          ApiResponse::Error(431, "request head over " + std::to_string(kMaxHeadBytes) + " bytes");
      return ReadOutcome::kRefused;
    }
    if (auto problem = ParseRequestHead(std::string_view(*in).substr(0, head_end), request)) {
      *refusal = ApiResponse::Error(problem->status, problem->message);
      return ReadOutcome::kRefused;
    }
    in->erase(0, head_end);
    if (auto early = endpoints_.Screen(*request, route)) {
      // Answered from the head: with a body announced, the body is not read, so the
      // connection cannot carry another request. A 401 closes it too (issue 29, F2): a client
      // without the token must not keep a connection that those with it need.
      const bool body = request->chunked || request->content_length.value_or(0) > 0;
      *refusal = std::move(*early);
      return body || (*refusal)->status == 401 ? ReadOutcome::kRefused : ReadOutcome::kEarly;
    }
    const SteadyTime body_deadline = deadline.value_or(SteadyClock::now() + kRequestTimeout);
    const bool has_body = request->chunked || request->content_length.value_or(0) > 0;
    if (has_body && in->empty()) {
      if (const std::string* expect = request->Header("expect")) {
        if (*expect == "100-continue" &&
            !SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n", SteadyClock::now() + kWriteTimeout)) {
          return ReadOutcome::kGone;
        }
      }
    }
    return ReadBody(fd, in, request, body_deadline, refusal);
  }

  // Reads until *in holds a whole request head, whose length goes to *head_end; nullopt then,
  // else how the request ended. The request's deadline (*deadline) starts at its first byte.
  std::optional<ReadOutcome> ReadHead(int fd, Millis idle, std::string* in, size_t* head_end,
                                      std::optional<SteadyTime>* deadline,
                                      std::optional<ApiResponse>* refusal) {
    const SteadyTime idle_deadline = SteadyClock::now() + idle;
    if (!in->empty()) *deadline = SteadyClock::now() + kRequestTimeout;
    *head_end = FindHeadEnd(*in);
    while (*head_end == std::string::npos) {
      if (in->size() > kMaxHeadBytes) {
        *refusal = ApiResponse::Error(
            431, "request head over " + std::to_string(kMaxHeadBytes) + " bytes");
        return ReadOutcome::kRefused;
      }
      const ReadResult result =
          ReadSome(fd, in, kMaxHeadBytes + 1 - in->size(), deadline->value_or(idle_deadline));
      if (result == ReadResult::kClosed || stopping_) return ReadOutcome::kGone;
      if (result == ReadResult::kTimeout) {
        if (in->empty()) return ReadOutcome::kGone;  // an idle keep-alive connection
        *refusal = ApiResponse::Error(408, "the request did not arrive in time");
        return ReadOutcome::kRefused;
      }
      if (!*deadline) *deadline = SteadyClock::now() + kRequestTimeout;
      *head_end = FindHeadEnd(*in);
    }
    return std::nullopt;
  }

  // Reads the body the head announced (chunked or Content-Length) into request->body, leaving
  // pipelined bytes in *in.
  ReadOutcome ReadBody(int fd, std::string* in, ApiRequest* request, SteadyTime body_deadline,
                       std::optional<ApiResponse>* refusal) {
    if (request->chunked) {
      const size_t limit = api_.max_body + kChunkedOverhead;
      ChunkedState chunked;  // each read decodes only what it added
      request->body.clear();
      while (true) {
        std::optional<HeadProblem> problem;
        const size_t used = DecodeChunked(*in, api_.max_body, &request->body, &problem, &chunked);
        if (problem) {
          *refusal = ApiResponse::Error(problem->status, problem->message);
          return ReadOutcome::kRefused;
        }
        if (used > 0) {
          in->erase(0, used);
          break;
        }
        if (in->size() > limit) {
          *refusal = ApiResponse::Error(413, "request body over api.max_body");
          return ReadOutcome::kRefused;
        }
        if (!ReadBodyBytes(fd, in, limit + 1 - in->size(), body_deadline, refusal)) {
          return refusal->has_value() ? ReadOutcome::kRefused : ReadOutcome::kGone;
        }
      }
    } else if (request->content_length) {
      const size_t length = *request->content_length;  // at most api.max_body (Screen)
      while (in->size() < length) {
        if (!ReadBodyBytes(fd, in, length - in->size(), body_deadline, refusal)) {
          return refusal->has_value() ? ReadOutcome::kRefused : ReadOutcome::kGone;
        }
      }
      request->body = in->substr(0, length);
      in->erase(0, length);
    }
    return ReadOutcome::kRequest;
  }

  bool ReadBodyBytes(int fd, std::string* in, size_t limit, SteadyTime deadline,
                     std::optional<ApiResponse>* refusal) {
    const ReadResult result = ReadSome(fd, in, limit, deadline);
    if (result == ReadResult::kData && !stopping_) return true;
    if (result == ReadResult::kTimeout) {
      *refusal = ApiResponse::Error(408, "the request body did not arrive in time");
    }
    return false;
  }

  config::ApiConfig api_;
  ApiEndpoints endpoints_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::thread prober_;
  std::mutex probe_mutex_;
  std::condition_variable probe_wake_;
  bool probe_stop_ = false;
  std::mutex mutex_;
  uint64_t next_id_ = 0;
  std::map<uint64_t, std::thread> threads_;
  std::map<uint64_t, int> open_fds_;
  std::condition_variable connection_ended_;  // an entry left open_fds_
  std::vector<uint64_t> finished_;
};

ApiServer::ApiServer(config::ApiConfig api, const std::vector<config::LogStream>& streams,
                     const ApiServerDeps& deps)
    : impl_(std::make_unique<Impl>(std::move(api), streams, deps)) {}

ApiServer::~ApiServer() { Stop(); }

Status ApiServer::Start() { return impl_->Start(); }

void ApiServer::Stop() { impl_->Stop(); }

int ApiServer::port() const { return impl_->port(); }

}  // namespace streamcar::log
