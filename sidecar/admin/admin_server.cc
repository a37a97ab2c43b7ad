#include "sidecar/admin/admin_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <list>
#include <optional>
#include <string_view>
#include <vector>

#include "sidecar/common/http_reason.h"
#include "sidecar/common/listen_socket.h"
#include "sidecar/common/log.h"
#include "sidecar/common/text.h"

namespace streamcar::admin {
namespace {

// What the server makes of one request head.
struct Answer {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  bool head = false;       // a HEAD request: the answer carries no body
  bool keep_alive = true;  // the connection may serve another request
  size_t consumed = 0;     // request bytes the answer accounts for
};

bool ContainsTokenIgnoreCase(std::string_view list, std::string_view token) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(start, comma - start);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (EqualsIgnoreCase(item, token)) return true;
    start = comma + 1;
  }
  return false;
}

Answer Error(int status, std::string body) {
  Answer answer;
  answer.status = status;
  answer.body = std::move(body);
  answer.keep_alive = false;
  return answer;
}

// The header fields from `at` on: only those that frame the request or the connection matter
// here. An answer when they are refused.
std::optional<Answer> ReadHeaderFields(std::string_view head, size_t at, bool* keep_alive,
                                       bool* has_body) {
  while (at < head.size()) {
    size_t end = head.find('\n', at);
    if (end == std::string_view::npos) end = head.size();
    std::string_view field = head.substr(at, end - at);
    at = end + 1;
    if (!field.empty() && field.back() == '\r') field.remove_suffix(1);
    if (field.empty()) break;
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Error(400, "malformed header field\n");
    }
    const std::string_view name = field.substr(0, colon);
    std::string_view value = field.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) {
      value.remove_suffix(1);
    }
    if (EqualsIgnoreCase(name, "content-length")) {
      uint64_t length = 0;
      auto [end_ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
      if (ec != std::errc() || end_ptr != value.data() + value.size()) {
        return Error(400, "malformed Content-Length\n");
      }
      if (length > AdminServer::kMaxRequestBytes) return Error(413, "request body too large\n");
      *has_body = *has_body || length > 0;
    } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
      *has_body = true;
    } else if (EqualsIgnoreCase(name, "connection")) {
      if (ContainsTokenIgnoreCase(value, "close")) *keep_alive = false;
      if (ContainsTokenIgnoreCase(value, "keep-alive")) *keep_alive = true;
    }
  }
  return std::nullopt;
}

}  // namespace

struct AdminServer::Connection {
  enum class State { kReading, kWriting, kLingering };
  int fd = -1;
  State state = State::kReading;
  std::string in;
  std::string out;
  size_t sent = 0;
  bool close_after_write = false;
  SteadyTime deadline;
  SteadyTime last_activity;
};

// The event loop: one thread, poll() over the wake-up descriptor, the listener and every
// connection.
class AdminServer::Loop {
 public:
  Loop(const AdminHandlers& handlers, int listen_fd, int wake_fd)
      : handlers_(handlers), listen_fd_(listen_fd), wake_fd_(wake_fd) {}

  ~Loop() {
    for (auto& c : connections_) ::close(c.fd);
  }

  void Run() {
    std::vector<pollfd> fds;
    std::vector<Connection*> polled;
    while (true) {
      fds.clear();
      polled.clear();
      fds.push_back({wake_fd_, POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      SteadyTime next_deadline = SteadyClock::now() + Millis(1000);
      for (auto& c : connections_) {
        const short events = c.state == Connection::State::kWriting ? POLLOUT : POLLIN;
        fds.push_back({c.fd, events, 0});
        polled.push_back(&c);
        next_deadline = std::min(next_deadline, c.deadline);
      }
      const auto wait = std::chrono::duration_cast<Millis>(next_deadline - SteadyClock::now());
      const int timeout = static_cast<int>(std::clamp<int64_t>(wait.count() + 1, 0, 1000));
      const int ready = ::poll(fds.data(), fds.size(), timeout);
      if (ready < 0 && errno != EINTR) {
        LogError("admin server: poll failed", {{"error", std::strerror(errno)}});
        return;
      }
      if (ready > 0 && (fds[0].revents & POLLIN) != 0) return;  // Stop()
      const SteadyTime now = SteadyClock::now();
      if (ready > 0) {
        // Connections first: an answer never waits behind a burst of new connections.
        for (size_t i = 0; i < polled.size(); ++i) {
          if (fds[i + 2].revents != 0) Serve(polled[i], now);
        }
      }
      CloseExpiredAndClosed(now);
      if (ready > 0 && (fds[1].revents & POLLIN) != 0) Accept(now);
    }
  }

 private:
  void Serve(Connection* c, SteadyTime now) {
    switch (c->state) {
      case Connection::State::kReading:
        if (!ReadInto(c, now)) return Close(c);
        Respond(c, now);
        return;
      case Connection::State::kWriting:
        Write(c, now);
        return;
      case Connection::State::kLingering: {
        char scratch[4096];
        while (true) {
          const ssize_t n = ::recv(c->fd, scratch, sizeof(scratch), 0);
          if (n > 0) continue;
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
          if (n < 0 && errno == EINTR) continue;
          return Close(c);  // end of input or an error: the client has the answer
        }
      }
    }
  }

  // Reads what is there; false when the peer closed or failed.
  bool ReadInto(Connection* c, SteadyTime now) {
    char buffer[4096];
    while (c->in.size() <= kMaxRequestBytes) {
      const ssize_t n = ::recv(c->fd, buffer, sizeof(buffer), 0);
      if (n > 0) {
        c->in.append(buffer, static_cast<size_t>(n));
        c->last_activity = now;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      // End of input (a client that half-closed after a whole request still gets its answer).
      return n == 0 && HasWholeHead(c->in);
    }
    return true;
  }

  static size_t HeadEnd(const std::string& in) {
    const size_t crlf = in.find("\r\n\r\n");
    const size_t lf = in.find("\n\n");
    if (crlf == std::string::npos && lf == std::string::npos) return std::string::npos;
    if (crlf == std::string::npos) return lf + 2;
    if (lf == std::string::npos) return crlf + 4;
    return std::min(crlf + 4, lf + 2);
  }
  static bool HasWholeHead(const std::string& in) { return HeadEnd(in) != std::string::npos; }

  // Answers the request at the start of c->in once its head is whole.
  void Respond(Connection* c, SteadyTime now) {
    if (c->state != Connection::State::kReading) return;
    const size_t head_end = HeadEnd(c->in);
    Answer answer;
    if (head_end == std::string::npos || head_end > kMaxRequestBytes) {
      if (c->in.size() <= kMaxRequestBytes) return;  // wait for the rest
      answer = Error(431, "request head too large\n");
    } else {
      answer = Handle(std::string_view(c->in).substr(0, head_end));
    }
    if (answer.keep_alive) {
      c->in.erase(0, answer.consumed);
    } else {
      c->in.clear();
    }
    c->out = "HTTP/1.1 " + std::to_string(answer.status) + " " + HttpReasonPhrase(answer.status) +
             "\r\nContent-Type: " + answer.content_type +
             "\r\nContent-Length: " + std::to_string(answer.body.size()) +
             "\r\nCache-Control: no-store\r\n";
    if (answer.status == 405) c->out += "Allow: GET\r\n";
    c->out += answer.keep_alive ? "\r\n" : "Connection: close\r\n\r\n";
    if (!answer.head) c->out += answer.body;
    c->sent = 0;
    c->close_after_write = !answer.keep_alive;
    c->state = Connection::State::kWriting;
    c->deadline = now + kWriteTimeout;
    Write(c, now);
  }

  void Write(Connection* c, SteadyTime now) {
    while (c->sent < c->out.size()) {
      const ssize_t n =
          ::send(c->fd, c->out.data() + c->sent, c->out.size() - c->sent, MSG_NOSIGNAL);
      if (n > 0) {
        c->sent += static_cast<size_t>(n);
        c->last_activity = now;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // wait for POLLOUT
      return Close(c);
    }
    c->out.clear();
    c->sent = 0;
    if (c->close_after_write) {
      // Half-close and drain what the client still sends, so our answer is not lost to a reset.
      ::shutdown(c->fd, SHUT_WR);
      c->state = Connection::State::kLingering;
      c->deadline = now + kLingerTimeout;
      return;
    }
    c->state = Connection::State::kReading;
    c->deadline = now + kRequestTimeout;
    if (!c->in.empty()) Respond(c, now);  // a pipelined request already arrived
  }

  Answer Handle(std::string_view head) {
    Answer answer;
    answer.consumed = head.size();
    // Request line: method SP target SP version.
    const size_t line_end = head.find('\n');
    std::string_view line = head.substr(0, line_end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp1 == 0 ||
        line.find(' ', sp2 + 1) != std::string_view::npos) {
      return Error(400, "malformed request line\n");
    }
    const std::string_view method = line.substr(0, sp1);
    std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = line.substr(sp2 + 1);
    if (version != "HTTP/1.1" && version != "HTTP/1.0") {
      return Error(version.starts_with("HTTP/") ? 505 : 400, "HTTP/1.1 or HTTP/1.0 only\n");
    }
    bool keep_alive = version == "HTTP/1.1";
    bool has_body = false;
    if (auto refused = ReadHeaderFields(head, line_end + 1, &keep_alive, &has_body)) {
      return *refused;
    }
    // A body is never read (GET needs none): answer, then close the connection.
    if (has_body) keep_alive = false;
    answer.keep_alive = keep_alive;
    if (method != "GET") {
      answer.status = 405;
      answer.body = "only GET is served here\n";
      answer.head = method == "HEAD";
      answer.keep_alive = false;
      return answer;
    }
    // Origin-form target; the query string, if any, is ignored.
    target = target.substr(0, target.find('?'));
    if (target == "/healthz") {
      const std::string wedged = handlers_.wedged_loop();
      answer.status = wedged.empty() ? 200 : 503;
      answer.body = wedged.empty() ? "ok\n" : "wedged: " + wedged + "\n";
    } else if (target == "/readyz") {
      const std::string why = handlers_.why_not_ready();
      answer.status = why.empty() ? 200 : 503;
      answer.body = why.empty() ? "ready\n" : "not ready: " + why + "\n";
    } else if (target == "/metrics") {
      answer.body = handlers_.metrics_text();
      answer.content_type = "text/plain; version=0.0.4; charset=utf-8";
    } else {
      answer.status = 404;
      answer.body = "not found: /healthz, /readyz and /metrics are served here\n";
    }
    return answer;
  }

  void Accept(SteadyTime now) {
    // A bounded number per turn, so a flood of connections cannot stall the answers.
    for (int i = 0; i < 64; ++i) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          // EMFILE and the like: logged (rate-limited by the log), retried on the next turn.
          LogError("admin server: accept failed", {{"error", std::strerror(errno)}});
        }
        return;
      }
      if (connections_.size() >= kMaxConnections) EvictIdlest();
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      Connection c;
      c.fd = fd;
      c.deadline = now + kRequestTimeout;
      c.last_activity = now;
      connections_.push_back(std::move(c));
    }
  }

  // Closes the connection that has gone longest without sending or taking a byte.
  void EvictIdlest() {
    auto idlest = std::min_element(
        connections_.begin(), connections_.end(),
        [](const Connection& a, const Connection& b) { return a.last_activity < b.last_activity; });
    if (idlest == connections_.end()) return;
    ::close(idlest->fd);
    connections_.erase(idlest);
  }

  void Close(Connection* c) {
    if (c->fd >= 0) ::close(c->fd);
    c->fd = -1;
  }

  void CloseExpiredAndClosed(SteadyTime now) {
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (it->fd >= 0 && it->deadline <= now) Close(&*it);
      if (it->fd < 0) {
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }

  const AdminHandlers& handlers_;
  int listen_fd_;
  int wake_fd_;
  // A list: Connection pointers stay valid while others are added or removed.
  std::list<Connection> connections_;
};

AdminServer::AdminServer(AdminHandlers handlers) : handlers_(std::move(handlers)) {}

AdminServer::~AdminServer() { Stop(); }

Status AdminServer::Start(const std::string& listen) {
  auto listening = ListenTcp(listen, "admin.listen");
  if (!listening.ok()) return listening.status();
  const int fd = *listening;
  port_ = BoundPort(fd);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    ::close(fd);
    return Status(StatusCode::kFatal,
                  std::string("admin server: eventfd: ") + std::strerror(errno));
  }
  listen_fd_ = fd;
  thread_ = std::thread([this] {
    Loop loop(handlers_, listen_fd_, wake_fd_);
    loop.Run();
  });
  return Status::Ok();
}

void AdminServer::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  listen_fd_ = -1;
  wake_fd_ = -1;
}

}  // namespace streamcar::admin
