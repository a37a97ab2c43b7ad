// Choosing the handler client by measurement (issue 13): streamcar's Http1Client on its
// EventLoop against libcurl's multi interface (driven by the same EventLoop through
// curl_multi_socket_action, and by curl's own curl_multi_poll loop) and, when the build found
// Boost 1.81, Boost.Beast on a single-threaded asio::io_context.
//
// Every candidate POSTs the same ~300-byte JSON body to a keep-alive HTTP/1.1 server that answers
// 200 with a tiny body. The server is a forked child (one thread, epoll), so its CPU is not in
// this process's getrusage(RUSAGE_SELF); the figures are the client's CPU (user + system) and
// voluntary context switches per request, in two regimes:
//   - paced: 1,000 requests/s (timer-driven, one in flight), the runtime's steady case;
//   - saturation: a closed loop with 1 and with 16 requests in flight: requests/s and CPU.
// Candidates run one after another within each round, rounds interleaved, and the median of the
// rounds is reported, each figure also as a ratio to our client (own = 1.00).
//
// Before that, the strictness cases: a scripted server sends answers SPEC 3.1 requires refused
// (both Content-Length and Transfer-Encoding, bare LF, folded headers, two answers to one
// request...) and the binary records what each candidate made of them.
//
//   http_client_bench [--paced-seconds S] [--saturate-seconds S] [--rate R] [--body BYTES]
//                     [--rounds N] [--json]
// --json prints one JSON object (for bench/run) instead of the table.

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#ifdef STREAMCAR_HAVE_BEAST
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#endif

#include "sidecar/common/clock.h"
#include "sidecar/common/event_loop.h"
#include "sidecar/delivery/http_client.h"
#include "sidecar/delivery/http_target.h"

namespace {

using streamcar::EventLoop;
using streamcar::Millis;
using streamcar::SteadyClock;
using streamcar::SteadyTime;

constexpr int kMaxConcurrency = 16;
constexpr Millis kRequestTimeout{5000};
constexpr std::string_view kAnswer =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";

// ---- The server: a forked child, one thread, epoll, keep-alive, answers every request 200. ----

struct ServerConnection {
  std::string in;
  std::string out;
};

// Length of the first whole request in `in` (head and Content-Length body), 0 if not all there.
size_t WholeRequest(const std::string& in) {
  const size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string::npos) return 0;
  size_t length = 0;
  for (size_t line = in.find("\r\n") + 2; line < head_end;) {
    const size_t next = in.find("\r\n", line);
    const std::string_view header(in.data() + line, next - line);
    constexpr std::string_view kName = "content-length:";
    if (header.size() > kName.size() &&
        std::equal(kName.begin(), kName.end(), header.begin(), [](char a, char b) {
          return a == std::tolower(static_cast<unsigned char>(b));
        })) {
      length = std::strtoul(std::string(header.substr(kName.size())).c_str(), nullptr, 10);
    }
    line = next + 2;
  }
  const size_t total = head_end + 4 + length;
  return in.size() >= total ? total : 0;
}

// With `scripted` set, the first request on each connection is answered with exactly those bytes
// and later ones not at all (the strictness cases); otherwise every request gets kAnswer.
[[noreturn]] void Serve(int listen_fd, std::string_view scripted) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = listen_fd;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &event);
  std::unordered_map<int, ServerConnection> connections;
  std::unordered_map<int, int> answered;  // requests seen per connection
  std::vector<epoll_event> ready(64);
  char buffer[16384];
  for (;;) {
    const int n = epoll_wait(epoll_fd, ready.data(), static_cast<int>(ready.size()), -1);
    for (int i = 0; i < n; ++i) {
      const int fd = ready[i].data.fd;
      if (fd == listen_fd) {
        const int client = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (client < 0) continue;
        const int one = 1;
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        event.events = EPOLLIN;
        event.data.fd = client;
        epoll_ctl(epoll_fd, EPOLL_CTL_ADD, client, &event);
        connections[client] = ServerConnection{};
        continue;
      }
      ServerConnection& connection = connections[fd];
      bool closed = false;
      for (;;) {
        const ssize_t got = read(fd, buffer, sizeof(buffer));
        if (got > 0) {
          connection.in.append(buffer, static_cast<size_t>(got));
          continue;
        }
        closed = got == 0 || (errno != EAGAIN && errno != EINTR);
        break;
      }
      for (size_t whole = WholeRequest(connection.in); whole > 0;
           whole = WholeRequest(connection.in)) {
        connection.in.erase(0, whole);
        if (scripted.empty()) {
          connection.out.append(kAnswer);
        } else if (answered[fd]++ == 0) {
          connection.out.append(scripted);
        }
      }
      // Answers are tiny: a blocking-enough write loop keeps the server simple.
      size_t sent = 0;
      while (!closed && sent < connection.out.size()) {
        const ssize_t put = write(fd, connection.out.data() + sent, connection.out.size() - sent);
        if (put > 0) {
          sent += static_cast<size_t>(put);
        } else if (put < 0 && errno != EAGAIN && errno != EINTR) {
          closed = true;
        }
      }
      connection.out.clear();
      if (closed) {
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
        close(fd);
        connections.erase(fd);
        answered.erase(fd);
      }
    }
  }
}

struct Server {
  pid_t pid = -1;
  int port = 0;
};

std::optional<Server> StartServer(std::string_view scripted = {}) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
      listen(fd, 128) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    std::perror("http_client_bench: listen");
    return std::nullopt;
  }
  const pid_t pid = fork();
  if (pid == 0) Serve(fd, scripted);
  close(fd);
  if (pid < 0) return std::nullopt;
  return Server{pid, ntohs(address.sin_port)};
}

// ---- The candidates ----

// One client under test: Post starts a POST of the body and `done(status)` runs later on the
// candidate's loop (never inside Post) with the answer's status, 0 for no answer; RunAt sets the
// one pacing timer; Run runs the loop until Stop.
class Candidate {
 public:
  virtual ~Candidate() = default;
  virtual const char* name() const = 0;
  virtual void Post(std::function<void(int status)> done) = 0;
  virtual void RunAt(SteadyTime at, std::function<void()> callback) = 0;
  virtual void Run() = 0;
  virtual void Stop() = 0;
};

// The pacing timer and Run/Stop on a streamcar EventLoop (shared by own and curl-on-our-loop).
// Run drives RunOnce until Stop, because EventLoop::Stop is sticky and a candidate runs many
// times.
class OnEventLoop : public Candidate {
 public:
  OnEventLoop() : loop_(std::move(*EventLoop::Create(clock_))) {
    pacer_ = loop_->CreateTimer([this] {
      auto callback = std::move(paced_);
      callback();
    });
  }
  void RunAt(SteadyTime at, std::function<void()> callback) override {
    paced_ = std::move(callback);
    pacer_->ArmAt(at);
  }
  void Run() override {
    stop_ = false;
    while (!stop_) loop_->RunOnce(Millis(1000));
  }
  void Stop() override { stop_ = true; }

 protected:
  ~OnEventLoop() override = default;
  EventLoop& loop() { return *loop_; }

 private:
  streamcar::SystemClock clock_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<EventLoop::Timer> pacer_;
  std::function<void()> paced_;
  bool stop_ = false;
};

class OwnCandidate final : public OnEventLoop {
 public:
  OwnCandidate(const std::string& url, std::string body) : body_(std::move(body)) {
    client_ = std::move(*streamcar::delivery::Http1Client::Create(
        loop(), streamcar::delivery::SplitUrl(url), std::nullopt, kMaxConcurrency));
  }
  ~OwnCandidate() override { client_.reset(); }
  const char* name() const override { return "own"; }
  void Post(std::function<void(int status)> done) override {
    streamcar::delivery::HttpRequest request{"application/json", body_, {}};
    client_->Send(std::move(request), kRequestTimeout,
                  [done = std::move(done)](const streamcar::delivery::HandlerResponse& response) {
                    const bool answered =
                        response.kind == streamcar::delivery::HandlerResponse::Kind::kAnswered;
                    done(answered ? response.status : 0);
                  });
  }

 private:
  std::string body_;
  std::unique_ptr<streamcar::delivery::Http1Client> client_;
};

// libcurl's easy handles, reused: one per request slot, removed from the multi handle when done
// and added again for the next request (the connection stays in the multi handle's cache).
class CurlHandles {
 public:
  CurlHandles(const std::string& url, std::string body) : body_(std::move(body)) {
    multi_ = curl_multi_init();
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, long{kMaxConcurrency});
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, long{kMaxConcurrency});
    headers_ = curl_slist_append(headers_, "Content-Type: application/json");
    headers_ = curl_slist_append(headers_, "Expect:");  // never wait for 100 Continue
    for (int i = 0; i < kMaxConcurrency; ++i) {
      auto slot = std::make_unique<Slot>();
      slot->easy = curl_easy_init();
      CURL* easy = slot->easy;
      curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
      curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers_);
      curl_easy_setopt(easy, CURLOPT_POST, 1L);
      curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
      curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(kRequestTimeout.count()));
      curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &CurlHandles::OnBody);
      curl_easy_setopt(easy, CURLOPT_WRITEDATA, slot.get());
      curl_easy_setopt(easy, CURLOPT_PRIVATE, slot.get());
      free_.push_back(slot.get());
      slots_.push_back(std::move(slot));
    }
  }
  ~CurlHandles() {
    for (auto& slot : slots_) {
      curl_multi_remove_handle(multi_, slot->easy);
      curl_easy_cleanup(slot->easy);
    }
    curl_multi_cleanup(multi_);
    curl_slist_free_all(headers_);
  }
  CurlHandles(const CurlHandles&) = delete;
  CurlHandles& operator=(const CurlHandles&) = delete;

  CURLM* multi() const { return multi_; }

  // Adds a request; the multi handle's timer callback (or the next perform) starts it.
  void Add(std::function<void(int status)> done) {
    Slot* slot = free_.back();
    free_.pop_back();
    slot->body = body_;  // a fresh body per request, as the runtime would build one
    slot->answer.clear();
    slot->done = std::move(done);
    curl_easy_setopt(slot->easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(slot->body.size()));
    curl_easy_setopt(slot->easy, CURLOPT_POSTFIELDS, slot->body.data());
    curl_multi_add_handle(multi_, slot->easy);
  }

  // Finishes every transfer curl reports done.
  void Collect() {
    int left = 0;
    while (CURLMsg* message = curl_multi_info_read(multi_, &left)) {
      if (message->msg != CURLMSG_DONE) continue;
      CURL* easy = message->easy_handle;
      const CURLcode result = message->data.result;
      long status = 0;
      curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
      Slot* slot = nullptr;
      curl_easy_getinfo(easy, CURLINFO_PRIVATE, &slot);
      curl_multi_remove_handle(multi_, easy);
      free_.push_back(slot);
      auto done = std::move(slot->done);
      done(result == CURLE_OK ? static_cast<int>(status) : 0);
    }
  }

 private:
  struct Slot {
    CURL* easy = nullptr;
    std::string body;
    std::string answer;
    std::function<void(int)> done;
  };
  static size_t OnBody(char* data, size_t size, size_t count, void* user) {
    static_cast<Slot*>(user)->answer.append(data, size * count);
    return size * count;
  }

  std::string body_;
  CURLM* multi_ = nullptr;
  curl_slist* headers_ = nullptr;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Slot*> free_;
};

// libcurl's multi-socket interface on our EventLoop: curl tells which sockets to watch
// (CURLMOPT_SOCKETFUNCTION) and when to call back (CURLMOPT_TIMERFUNCTION); every readiness and
// the timer go to curl_multi_socket_action. This is how the runtime would embed curl.
class CurlOnLoopCandidate final : public OnEventLoop {
 public:
  CurlOnLoopCandidate(const std::string& url, std::string body) : handles_(url, std::move(body)) {
    curl_timer_ = loop().CreateTimer([this] { Action(CURL_SOCKET_TIMEOUT, 0); });
    curl_multi_setopt(handles_.multi(), CURLMOPT_SOCKETFUNCTION, &CurlOnLoopCandidate::OnSocket);
    curl_multi_setopt(handles_.multi(), CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(handles_.multi(), CURLMOPT_TIMERFUNCTION, &CurlOnLoopCandidate::OnTimer);
    curl_multi_setopt(handles_.multi(), CURLMOPT_TIMERDATA, this);
  }
  ~CurlOnLoopCandidate() override {
    curl_multi_setopt(handles_.multi(), CURLMOPT_SOCKETFUNCTION, nullptr);
    curl_multi_setopt(handles_.multi(), CURLMOPT_TIMERFUNCTION, nullptr);
  }
  const char* name() const override { return "curl-loop"; }
  void Post(std::function<void(int status)> done) override { handles_.Add(std::move(done)); }

 private:
  static int OnSocket(CURL* /*easy*/, curl_socket_t fd, int what, void* user, void* /*socket*/) {
    auto* self = static_cast<CurlOnLoopCandidate*>(user);
    if (what == CURL_POLL_REMOVE) {
      self->watches_.erase(fd);
      return 0;
    }
    const uint32_t interest = ((what & CURL_POLL_IN) != 0 ? EventLoop::kReadable : 0U) |
                              ((what & CURL_POLL_OUT) != 0 ? EventLoop::kWritable : 0U);
    auto found = self->watches_.find(fd);
    if (found != self->watches_.end()) {
      found->second->SetInterest(interest);
      return 0;
    }
    auto watch = self->loop().Watch(fd, interest, [self, fd](uint32_t ready) {
      const int mask = ((ready & EventLoop::kReadable) != 0 ? CURL_CSELECT_IN : 0) |
                       ((ready & EventLoop::kWritable) != 0 ? CURL_CSELECT_OUT : 0) |
                       ((ready & EventLoop::kHangup) != 0 ? CURL_CSELECT_ERR : 0);
      self->Action(fd, mask);
    });
    if (!watch.ok()) return -1;
    self->watches_[fd] = std::move(*watch);
    return 0;
  }
  static int OnTimer(CURLM* /*multi*/, long timeout_ms, void* user) {
    auto* self = static_cast<CurlOnLoopCandidate*>(user);
    if (timeout_ms < 0) {
      self->curl_timer_->Cancel();
    } else {
      self->curl_timer_->ArmIn(Millis(timeout_ms));
    }
    return 0;
  }
  void Action(curl_socket_t fd, int mask) {
    int running = 0;
    curl_multi_socket_action(handles_.multi(), fd, mask, &running);
    handles_.Collect();
  }

  CurlHandles handles_;
  std::unique_ptr<EventLoop::Timer> curl_timer_;
  std::unordered_map<curl_socket_t, std::unique_ptr<EventLoop::FdWatch>> watches_;
};

// libcurl's own loop: curl_multi_perform and curl_multi_poll (curl polls its sockets itself),
// the simplest idiomatic use of the multi interface. The pacing timer bounds the poll.
class CurlPollCandidate final : public Candidate {
 public:
  CurlPollCandidate(const std::string& url, std::string body) : handles_(url, std::move(body)) {}
  const char* name() const override { return "curl-poll"; }
  void Post(std::function<void(int status)> done) override { handles_.Add(std::move(done)); }
  void RunAt(SteadyTime at, std::function<void()> callback) override {
    paced_at_ = at;
    paced_ = std::move(callback);
  }
  void Run() override {
    stop_ = false;
    while (!stop_) {
      int running = 0;
      curl_multi_perform(handles_.multi(), &running);
      handles_.Collect();
      if (paced_ && SteadyClock::now() >= paced_at_) {
        auto callback = std::move(paced_);
        paced_ = nullptr;
        callback();
        continue;  // a request may have been added: perform at once
      }
      if (stop_) break;
      int wait_ms = 1000;
      if (paced_) {
        const auto left = std::chrono::ceil<Millis>(paced_at_ - SteadyClock::now()).count();
        wait_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 1000));
      }
      curl_multi_poll(handles_.multi(), nullptr, 0, wait_ms, nullptr);
    }
  }
  void Stop() override { stop_ = true; }

 private:
  CurlHandles handles_;
  SteadyTime paced_at_;
  std::function<void()> paced_;
  bool stop_ = false;
};

#ifdef STREAMCAR_HAVE_BEAST
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// Boost.Beast on one single-threaded io_context: keep-alive connections taken from an idle list
// (opened on demand), http::async_write then http::async_read into a reused flat_buffer, and
// tcp_stream's deadline for each exchange (as the Beast examples do).
class BeastCandidate final : public Candidate {
 public:
  BeastCandidate(int port, std::string body)
      : body_(std::move(body)),
        endpoint_(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)),
        authority_("127.0.0.1:" + std::to_string(port)),
        pacer_(context_),
        work_(asio::make_work_guard(context_)) {}
  const char* name() const override { return "beast"; }

  void Post(std::function<void(int status)> done) override {
    Connection* connection = nullptr;
    if (idle_.empty()) {
      connections_.push_back(std::make_unique<Connection>(context_));
      connection = connections_.back().get();
    } else {
      connection = idle_.back();
      idle_.pop_back();
    }
    connection->done = std::move(done);
    connection->request = {};
    connection->request.method(http::verb::post);
    connection->request.target("/");
    connection->request.version(11);
    connection->request.set(http::field::host, authority_);
    connection->request.set(http::field::content_type, "application/json");
    connection->request.body() = body_;
    connection->request.prepare_payload();
    connection->stream.expires_after(kRequestTimeout);
    if (connection->open) {
      Write(connection);
      return;
    }
    connection->stream.async_connect(endpoint_, [this, connection](beast::error_code error) {
      if (error) return Finish(connection, 0, false);
      connection->open = true;
      connection->stream.socket().set_option(asio::ip::tcp::no_delay(true));
      Write(connection);
    });
  }
  void RunAt(SteadyTime at, std::function<void()> callback) override {
    pacer_.expires_at(at);
    pacer_.async_wait([callback = std::move(callback)](beast::error_code error) {
      if (!error) callback();
    });
  }
  void Run() override {
    context_.restart();
    context_.run();
  }
  void Stop() override { context_.stop(); }

 private:
  struct Connection {
    explicit Connection(asio::io_context& context) : stream(context) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::string_body> response;
    bool open = false;
    std::function<void(int)> done;
  };

  void Write(Connection* connection) {
    http::async_write(
        connection->stream, connection->request,
        [this, connection](beast::error_code error, size_t /*written*/) {
          if (error) return Finish(connection, 0, false);
          connection->response = {};
          http::async_read(connection->stream, connection->buffer, connection->response,
                           [this, connection](beast::error_code read_error, size_t /*read*/) {
                             if (read_error) return Finish(connection, 0, false);
                             Finish(connection, static_cast<int>(connection->response.result_int()),
                                    connection->response.keep_alive());
                           });
        });
  }
  void Finish(Connection* connection, int status, bool keep) {
    connection->stream.expires_never();
    if (!keep) {
      connection->stream.close();
      connection->buffer.clear();
      connection->open = false;
    }
    idle_.push_back(connection);
    auto done = std::move(connection->done);
    done(status);
  }

  std::string body_;
  asio::io_context context_{1};
  asio::ip::tcp::endpoint endpoint_;
  std::string authority_;
  asio::steady_timer pacer_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::vector<Connection*> idle_;
};
#endif

// ---- The regimes ----

struct Usage {
  double cpu_seconds = 0;
  int64_t voluntary = 0;
  int64_t involuntary = 0;
};

Usage Now() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return {seconds(usage.ru_utime) + seconds(usage.ru_stime), usage.ru_nvcsw, usage.ru_nivcsw};
}

struct Figures {
  double requests_per_second = 0;
  double cpu_us = 0;     // CPU (user + system) per request
  double voluntary = 0;  // voluntary context switches per request
  double p50_us = 0;
  double p99_us = 0;
  int64_t requests = 0;
  int64_t failed = 0;
};

class Recorder {
 public:
  void Begin() {
    latencies_.clear();
    failed_ = 0;
    usage_ = Now();
    start_ = SteadyClock::now();
  }
  void Record(SteadyTime sent, bool ok) {
    latencies_.push_back(
        std::chrono::duration<double, std::micro>(SteadyClock::now() - sent).count());
    if (!ok) ++failed_;
  }
  Figures End() {
    const double wall = std::chrono::duration<double>(SteadyClock::now() - start_).count();
    const Usage usage = Now();
    Figures figures;
    figures.requests = static_cast<int64_t>(latencies_.size());
    figures.failed = failed_;
    const double n = std::max<double>(1, static_cast<double>(figures.requests));
    figures.requests_per_second = static_cast<double>(figures.requests) / wall;
    figures.cpu_us = (usage.cpu_seconds - usage_.cpu_seconds) * 1e6 / n;
    figures.voluntary = static_cast<double>(usage.voluntary - usage_.voluntary) / n;
    std::sort(latencies_.begin(), latencies_.end());
    if (!latencies_.empty()) {
      figures.p50_us = latencies_[latencies_.size() / 2];
      figures.p99_us = latencies_[latencies_.size() * 99 / 100];
    }
    return figures;
  }

 private:
  std::vector<double> latencies_;
  int64_t failed_ = 0;
  Usage usage_;
  SteadyTime start_;
};

// A closed loop: `concurrency` requests in flight until `seconds` have passed.
Figures Saturate(Candidate& candidate, int concurrency, double seconds) {
  Recorder recorder;
  int outstanding = 0;
  SteadyTime end;
  std::function<void()> issue = [&] {
    ++outstanding;
    const SteadyTime sent = SteadyClock::now();
    candidate.Post([&, sent](int status) {
      --outstanding;
      recorder.Record(sent, status == 200);
      if (SteadyClock::now() < end) {
        issue();
      } else if (outstanding == 0) {
        candidate.Stop();
      }
    });
  };
  recorder.Begin();
  end = SteadyClock::now() +
        std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
  for (int i = 0; i < concurrency; ++i) issue();
  candidate.Run();
  return recorder.End();
}

// Requests at `rate` per second for `seconds`, one in flight: request i is due at start + i /
// rate; one that falls due while the previous is in flight is sent when it finishes.
Figures Paced(Candidate& candidate, double rate, double seconds) {
  Recorder recorder;
  const auto total = static_cast<int64_t>(rate * seconds);
  const auto interval =
      std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(1.0 / rate));
  int64_t issued = 0;
  int64_t owed = 0;
  bool in_flight = false;
  SteadyTime start;
  std::function<void()> send;
  std::function<void()> tick;
  send = [&] {
    in_flight = true;
    const SteadyTime sent = SteadyClock::now();
    candidate.Post([&, sent](int status) {
      in_flight = false;
      recorder.Record(sent, status == 200);
      if (owed > 0) {
        --owed;
        send();
      } else if (issued == total) {
        candidate.Stop();
      }
    });
  };
  tick = [&] {
    ++issued;
    if (in_flight) {
      ++owed;
    } else {
      send();
    }
    if (issued < total) candidate.RunAt(start + interval * issued, tick);
  };
  recorder.Begin();
  start = SteadyClock::now();
  candidate.RunAt(start, tick);
  candidate.Run();
  return recorder.End();
}

// ---- Strictness: answers SPEC 3.1 says must never be matched to a request ----

struct StrictnessCase {
  const char* name;
  std::string answer;  // the bytes the server sends for the first request on a connection
  bool two_requests;   // send a second request after the first is done
};

std::vector<StrictnessCase> StrictnessCases() {
  return {
      {"Content-Length and Transfer-Encoding",
       "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
       false},
      {"bare LF line ends", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", false},
      {"garbage protocol name", "HXYZ/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false},
      {"space before the colon", "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok", false},
      {"folded header line", "HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 2\r\n\r\nok",
       false},
      // A second answer (202) arrives with the first; the next request on that connection must
      // not take it (the server never answers a second request on a connection).
      {"two answers to one request",
       "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
       "HTTP/1.1 202 Accepted\r\nContent-Length: 8\r\n\r\nsmuggled",
       true},
  };
}

std::string Verdict(int status) {
  if (status < 0) return "no answer";
  if (status == 0) return "rejected";
  return "took " + std::to_string(status);
}

using CandidateFactory =
    std::function<std::unique_ptr<Candidate>(const std::string& url, int port)>;

// What each candidate reports for each case: "rejected", "took <status>", or for two requests
// "<first> / <second>".
std::vector<std::vector<std::string>> RunStrictness(
    const std::vector<CandidateFactory>& factories) {
  std::vector<std::vector<std::string>> verdicts;
  for (const StrictnessCase& test : StrictnessCases()) {
    const std::optional<Server> server = StartServer(test.answer);
    if (!server) std::exit(1);
    const std::string url = "http://127.0.0.1:" + std::to_string(server->port) + "/";
    std::vector<std::string> row;
    for (const CandidateFactory& factory : factories) {
      std::unique_ptr<Candidate> candidate = factory(url, server->port);
      int first = -1;
      int second = -1;
      candidate->Post([&](int status) {
        first = status;
        if (!test.two_requests) return candidate->Stop();
        candidate->Post([&](int next) {
          second = next;
          candidate->Stop();
        });
      });
      candidate->RunAt(SteadyClock::now() + Millis(1000), [&] { candidate->Stop(); });
      candidate->Run();
      row.push_back(test.two_requests ? Verdict(first) + " / " + Verdict(second) : Verdict(first));
    }
    kill(server->pid, SIGKILL);
    waitpid(server->pid, nullptr, 0);
    verdicts.push_back(std::move(row));
  }
  return verdicts;
}

// ---- Main ----

struct Options {
  double paced_seconds = 5;
  double saturate_seconds = 3;
  double rate = 1000;
  size_t body_bytes = 300;
  int rounds = 3;
  bool json = false;
};

bool ParseOptions(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--json") {
      options->json = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (flag == "--paced-seconds") {
      options->paced_seconds = std::atof(value);
    } else if (flag == "--saturate-seconds") {
      options->saturate_seconds = std::atof(value);
    } else if (flag == "--rate") {
      options->rate = std::atof(value);
    } else if (flag == "--body") {
      options->body_bytes = std::strtoul(value, nullptr, 10);
    } else if (flag == "--rounds") {
      options->rounds = std::atoi(value);
    } else {
      return false;
    }
  }
  return options->paced_seconds > 0 && options->saturate_seconds > 0 && options->rate > 0 &&
         options->rounds > 0 && options->body_bytes >= 64;
}

// The delivery envelope of SPEC 3.1, padded to `bytes`.
std::string Body(size_t bytes) {
  std::string body =
      R"({"id":"1700000000000-0","stream":"orders","group":"billing","attempts":1,"payload":{"n":"1","pad":")";
  const std::string tail = R"("}})";
  body.append(bytes > body.size() + tail.size() ? bytes - body.size() - tail.size() : 0, 'x');
  return body + tail;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

struct Regime {
  std::string name;
  bool paced;
  int concurrency;
};

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, &options)) {
    std::fprintf(stderr,
                 "usage: http_client_bench [--paced-seconds S] [--saturate-seconds S] [--rate R] "
                 "[--body BYTES] [--rounds N] [--json]\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  const std::optional<Server> server = StartServer();  // before any thread exists
  if (!server) return 1;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const std::string url = "http://127.0.0.1:" + std::to_string(server->port) + "/";
  const std::string body = Body(options.body_bytes);

  std::vector<CandidateFactory> factories = {
      [&](const std::string& to, int) { return std::make_unique<OwnCandidate>(to, body); },
      [&](const std::string& to, int) { return std::make_unique<CurlOnLoopCandidate>(to, body); },
      [&](const std::string& to, int) { return std::make_unique<CurlPollCandidate>(to, body); },
#ifdef STREAMCAR_HAVE_BEAST
      [&](const std::string&, int port) { return std::make_unique<BeastCandidate>(port, body); },
#endif
  };
  const std::vector<std::vector<std::string>> strictness = RunStrictness(factories);
  std::vector<std::unique_ptr<Candidate>> candidates;
  candidates.reserve(factories.size());
  for (const CandidateFactory& factory : factories) {
    candidates.push_back(factory(url, server->port));
  }

  const std::vector<Regime> regimes = {
      {"paced " + std::to_string(static_cast<int>(options.rate)) + "/s, c=1", true, 1},
      {"saturation, c=1", false, 1},
      {"saturation, c=16", false, 16},
  };
  // figures[regime][candidate][round]
  std::vector<std::vector<std::vector<Figures>>> figures(
      regimes.size(), std::vector<std::vector<Figures>>(candidates.size()));
  int exit_code = 0;
  for (int round = 0; round < options.rounds; ++round) {
    for (size_t r = 0; r < regimes.size(); ++r) {
      for (size_t c = 0; c < candidates.size(); ++c) {
        Candidate& candidate = *candidates[c];
        // Warm up: the connections of this concurrency open before the clock starts.
        Saturate(candidate, regimes[r].concurrency, 0.1);
        Figures f = regimes[r].paced
                        ? Paced(candidate, options.rate, options.paced_seconds)
                        : Saturate(candidate, regimes[r].concurrency, options.saturate_seconds);
        if (f.failed > 0) {
          std::fprintf(stderr, "http_client_bench: %s failed %lld requests in %s\n",
                       candidate.name(), static_cast<long long>(f.failed), regimes[r].name.c_str());
          exit_code = 1;
        }
        figures[r][c].push_back(f);
      }
    }
  }

  // Medians over the rounds, and ratios to our client (candidate 0).
  auto median = [&](size_t r, size_t c, double Figures::*field) {
    std::vector<double> values;
    for (const Figures& f : figures[r][c]) values.push_back(f.*field);
    return Median(values);
  };
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  if (options.json) {
    std::printf(
        "{\"body_bytes\":%zu,\"rounds\":%d,\"paced_seconds\":%g,\"saturate_seconds\":%g,"
        "\"load\":%.2f,\"regimes\":[",
        body.size(), options.rounds, options.paced_seconds, options.saturate_seconds, load[0]);
    for (size_t r = 0; r < regimes.size(); ++r) {
      std::printf(R"(%s{"name":"%s","paced":%s,"concurrency":%d,"clients":[)", r > 0 ? "," : "",
                  regimes[r].name.c_str(), regimes[r].paced ? "true" : "false",
                  regimes[r].concurrency);
      for (size_t c = 0; c < candidates.size(); ++c) {
        std::printf(
            "%s{\"client\":\"%s\",\"rps\":%.1f,\"cpu_us\":%.2f,\"vcsw\":%.3f,"
            "\"p50_us\":%.1f,\"p99_us\":%.1f}",
            c > 0 ? "," : "", candidates[c]->name(), median(r, c, &Figures::requests_per_second),
            median(r, c, &Figures::cpu_us), median(r, c, &Figures::voluntary),
            median(r, c, &Figures::p50_us), median(r, c, &Figures::p99_us));
      }
      std::printf("]}");
    }
    std::printf(R"(],"strictness":[)");
    const std::vector<StrictnessCase> cases = StrictnessCases();
    for (size_t k = 0; k < cases.size(); ++k) {
      std::printf(R"(%s{"case":"%s")", k > 0 ? "," : "", cases[k].name);
      for (size_t c = 0; c < candidates.size(); ++c) {
        std::printf(R"(,"%s":"%s")", candidates[c]->name(), strictness[k][c].c_str());
      }
      std::printf("}");
    }
    std::printf("]}\n");
  } else {
    std::printf("body %zu bytes, %d round(s), medians; ratios against own = 1.00; load %.2f\n",
                body.size(), options.rounds, load[0]);
    std::printf("%-20s %-10s %9s %6s %8s %6s %8s %6s %8s %8s\n", "regime", "client", "req/s", "x",
                "CPU us", "x", "vcsw", "x", "p50 us", "p99 us");
    for (size_t r = 0; r < regimes.size(); ++r) {
      const double base_rps = median(r, 0, &Figures::requests_per_second);
      const double base_cpu = median(r, 0, &Figures::cpu_us);
      const double base_vcsw = median(r, 0, &Figures::voluntary);
      for (size_t c = 0; c < candidates.size(); ++c) {
        const double rps = median(r, c, &Figures::requests_per_second);
        const double cpu = median(r, c, &Figures::cpu_us);
        const double vcsw = median(r, c, &Figures::voluntary);
        std::printf("%-20s %-10s %9.0f %6.2f %8.2f %6.2f %8.3f %6.2f %8.1f %8.1f\n",
                    regimes[r].name.c_str(), candidates[c]->name(), rps, rps / base_rps, cpu,
                    cpu / base_cpu, vcsw, base_vcsw > 0 ? vcsw / base_vcsw : 0.0,
                    median(r, c, &Figures::p50_us), median(r, c, &Figures::p99_us));
      }
    }
    std::printf("\nstrictness (a strict client rejects every one of these answers):\n");
    const std::vector<StrictnessCase> cases = StrictnessCases();
    for (size_t k = 0; k < cases.size(); ++k) {
      std::printf("%-38s", cases[k].name);
      for (size_t c = 0; c < candidates.size(); ++c) {
        std::printf(" %s: %-24s", candidates[c]->name(), strictness[k][c].c_str());
      }
      std::printf("\n");
    }
  }
  candidates.clear();
  curl_global_cleanup();
  kill(server->pid, SIGKILL);
  waitpid(server->pid, nullptr, 0);
  return exit_code;
}
