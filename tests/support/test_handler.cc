#include "tests/support/test_handler.h"

#include <httplib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "tests/support/redis_server.h"

namespace streamcar::testing {
namespace {

// httplib 0.11 listens on TCP only; its accept loop (listen_after_bind) takes any listening
// socket in svr_sock_, and everything it does on a connection works on a Unix socket too.
class UnixSocketServer final : public httplib::Server {
 public:
  bool BindUnix(const std::string& path) {
    ::unlink(path.c_str());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (fd < 0 || path.size() >= sizeof(address.sun_path)) return false;
    path.copy(address.sun_path, path.size());
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(fd, 128) != 0) {
      ::close(fd);
      return false;
    }
    svr_sock_ = fd;
    return true;
  }
};

}  // namespace

std::string ReceivedRequest::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

TestHandler::TestHandler(int port) : port_(port == 0 ? FreePort() : port) {
  behaviour_ = [](const ReceivedRequest&) { return HandlerReply{}; };
  // A port of our own choosing that still cannot be bound (a process outside the suite's port
  // locks took it): another one, a few times, rather than a failed test.
  for (int attempt = 1;; ++attempt) {
    try {
      Listen();
      return;
    } catch (const std::runtime_error&) {
      if (port != 0 || attempt == 5) throw;
    }
    port_ = FreePort();
  }
}

TestHandler::TestHandler(const std::string& unix_socket) : port_(0), unix_socket_(unix_socket) {
  behaviour_ = [](const ReceivedRequest&) { return HandlerReply{}; };
  Listen();
}

TestHandler::~TestHandler() {
  Stop();
  if (!unix_socket_.empty()) ::unlink(unix_socket_.c_str());
}

std::string TestHandler::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

void TestHandler::SetBehaviour(Behaviour behaviour) {
  std::lock_guard lock(mutex_);
  behaviour_ = std::move(behaviour);
}

void TestHandler::Listen() {
  server_ = std::make_unique<UnixSocketServer>();
  // SO_REUSEADDR, as every server of the suite binds and as FreePort() checks. httplib's default
  // is SO_REUSEPORT alone, which cannot bind a port that still has a connection in TIME_WAIT
  // from an earlier server without SO_REUSEPORT (a redis-server, a sidecar's admin port, of a
  // test that has ended): FreePort() found such a port free and the bind then failed.
  server_->set_socket_options([](int fd) {
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  });
  server_->set_tcp_nodelay(true);
  server_->new_task_queue = [] { return new httplib::ThreadPool(64); };
  auto handle = [this](const httplib::Request& req, httplib::Response& res) {
    ReceivedRequest received;
    received.method = req.method;
    received.path = req.path;
    for (const auto& [name, value] : req.headers) {
      std::string lower = name;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      received.headers.emplace(lower, value);
    }
    received.body = req.body;
    received.at = std::chrono::steady_clock::now();
    Behaviour behaviour;
    {
      std::lock_guard lock(mutex_);
      behaviour = behaviour_;
    }
    HandlerReply reply = behaviour(received);
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(received);
    }
    cv_.notify_all();
    if (reply.delay.count() > 0) std::this_thread::sleep_for(reply.delay);
    res.status = reply.status;
    for (const auto& [name, value] : reply.headers) res.set_header(name, value);
    res.set_content(reply.body, "application/json");
  };
  server_->Post(".*", handle);
  server_->Get(".*", handle);
  if (!unix_socket_.empty()) {
    if (!static_cast<UnixSocketServer&>(*server_).BindUnix(unix_socket_)) {
      server_.reset();
      throw std::runtime_error("test handler cannot listen on " + unix_socket_);
    }
  } else if (!server_->bind_to_port("127.0.0.1", port_)) {
    server_.reset();
    throw std::runtime_error("test handler cannot bind 127.0.0.1:" + std::to_string(port_));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void TestHandler::Stop() {
  if (!server_) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

void TestHandler::Restart() {
  Stop();
  Listen();
}

std::vector<ReceivedRequest> TestHandler::Requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

size_t TestHandler::Count() const {
  std::lock_guard lock(mutex_);
  return requests_.size();
}

bool TestHandler::WaitFor(const std::function<bool(const std::vector<ReceivedRequest>&)>& predicate,
                          std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return predicate(requests_); });
}

bool TestHandler::WaitForCount(size_t n, std::chrono::milliseconds timeout) {
  return WaitFor([n](const auto& requests) { return requests.size() >= n; }, timeout);
}

}  // namespace streamcar::testing
