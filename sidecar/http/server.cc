#include "sidecar/http/server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "sidecar/common/listen_socket.h"
#include "sidecar/common/log.h"
#include "sidecar/http/exchange.h"

namespace streamcar::http {

struct Server::Connection {
  enum class State { kHead, kBody, kWaiting, kWriting, kStreaming, kLingering };
  uint64_t id = 0;
  int fd = -1;
  bool dead = false;
  State state = State::kHead;
  std::unique_ptr<EventLoop::FdWatch> watch;
  std::unique_ptr<EventLoop::Timer> timer;
  std::string in;
  std::string out;
  size_t sent = 0;
  bool input_closed = false;   // the client half-closed: no more requests will come
  bool close_after = false;    // close once `out` is written
  bool authenticated = false;  // the service vouched for the last request head
  bool answered = false;       // at least one answer was written (keep-alive idle applies)
  // Of the request being answered (Handle takes the request itself).
  bool head_only = false;  // HEAD: the answer carries no body
  bool keep_alive = true;
  Request request;
  ChunkedState chunked;
  std::optional<SteadyTime> request_deadline;  // from the request's first byte
  SteadyTime quiet_since;                      // the last byte read or written
  SteadyTime linger_until;
  std::shared_ptr<Responder::Exchange> exchange;
  uint64_t exchanges = 0;
  bool stream_finished = false;
};

namespace {

// A chunked body may carry this much framing beyond max_body before it is refused.
constexpr size_t kChunkedOverhead = size_t{64} * 1024;
// New connections taken per readiness of the listener: a flood cannot stall the answers.
constexpr int kAcceptBurst = 64;

}  // namespace

Server::Server(EventLoop* loop, ServerOptions options, Service* service)
    : loop_(loop),
      options_(std::move(options)),
      service_(service),
      link_(std::make_shared<ServerLink>()) {
  link_->server = this;
  link_->loop = loop;
}

Server::~Server() {
  {
    std::lock_guard lock(link_->mutex);
    link_->server = nullptr;
  }
  for (auto& [id, c] : connections_) {
    if (c->exchange) c->exchange->gone.store(true, std::memory_order_release);
    c->watch.reset();
    c->timer.reset();
    if (c->fd >= 0) ::close(c->fd);
  }
  listen_watch_.reset();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

Status Server::Listen(const std::string& listen, const std::string& setting) {
  auto fd = ListenTcp(listen, setting);
  if (!fd.ok()) return fd.status();
  auto watch = loop_->Watch(*fd, EventLoop::kReadable, [this](uint32_t) { Accept(); });
  if (!watch.ok()) {
    ::close(*fd);
    return Status(StatusCode::kFatal, options_.name + ": " + watch.status().message());
  }
  listen_fd_ = *fd;
  port_ = BoundPort(listen_fd_);
  loopback_ = BoundToLoopback(listen_fd_);
  listen_watch_ = std::move(*watch);
  return Status::Ok();
}

void Server::Accept() {
  for (int i = 0; i < kAcceptBurst; ++i) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        // EMFILE and the like: logged (rate-limited by the log), retried on the next turn.
        LogError(options_.name + ": accept failed", {{"error", std::strerror(errno)}});
      }
      return;
    }
    Admit(fd);
  }
}

void Server::Admit(int fd) {
  if (live_ >= options_.max_connections && !MakeRoom()) {
    // Everyone is busy with an answer: say so (it fits any socket buffer) and close.
    Response busy = service_->Refusal(503, "too many connections");
    busy.headers.emplace_back("Retry-After", "1");
    busy.close = true;
    const std::string bytes = SerializeResponse(busy);
    [[maybe_unused]] ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    ::close(fd);
    return;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto c = std::make_unique<Connection>();
  Connection* raw = c.get();
  c->id = next_id_++;
  c->fd = fd;
  c->quiet_since = loop_->clock().Now();
  auto watch =
      loop_->Watch(fd, EventLoop::kReadable, [this, raw](uint32_t ready) { OnReady(raw, ready); });
  if (!watch.ok()) {
    LogError(options_.name + ": cannot watch a connection", {{"error", watch.status().message()}});
    ::close(fd);
    return;
  }
  c->watch = std::move(*watch);
  c->timer = loop_->CreateTimer([this, raw] { OnDeadline(raw); });
  connections_.emplace(c->id, std::move(c));
  ++live_;
  Rearm(raw);
}

// Closes one connection to make room for a new one; false when none may be evicted.
bool Server::MakeRoom() {
  // Lower ranks go first: idle and unauthenticated, then still sending a request and
  // unauthenticated, then the same for authenticated connections.
  Connection* victim = nullptr;
  int victim_rank = 4;
  for (auto& [id, c] : connections_) {
    if (c->dead) continue;
    if (c->state != Connection::State::kHead && c->state != Connection::State::kBody &&
        c->state != Connection::State::kLingering) {
      continue;
    }
    const bool idle = c->state == Connection::State::kLingering ||
                      (c->state == Connection::State::kHead && c->in.empty());
    const int rank = (c->authenticated ? 2 : 0) + (idle ? 0 : 1);
    if (rank < victim_rank || (rank == victim_rank && c->quiet_since < victim->quiet_since)) {
      victim = c.get();
      victim_rank = rank;
    }
  }
  if (victim == nullptr) return false;
  Close(victim);
  return true;
}

void Server::OnReady(Connection* c, uint32_t ready) {
  if (c->dead) return;
  if ((ready & EventLoop::kWritable) != 0) {
    Flush(c);
    if (c->dead) return;
  }
  if ((ready & EventLoop::kReadable) != 0 || (ready & EventLoop::kHangup) != 0) {
    if (c->state == Connection::State::kHead || c->state == Connection::State::kBody ||
        c->state == Connection::State::kLingering) {
      ReadAvailable(c);
      if (c->dead) return;
      Advance(c);
      return;
    }
    if (c->state == Connection::State::kStreaming) {
      DrainStreaming(c);
      return;
    }
    // Waiting for an answer: a hang-up ends the connection; anything else is the next request
    // (pipelined), left in the socket until this answer is out (AfterWritten reads it).
    if ((ready & EventLoop::kHangup) != 0) {
      Close(c);
      return;
    }
    c->watch->SetInterest(0);
  }
}

// A stream's client sends nothing more that means anything; its end of input means it left (an
// event stream has no answer to wait for), so the stream ends now, not at its next failed write.
void Server::DrainStreaming(Connection* c) {
  char buffer[16384];
  // A client that keeps sending must not hold the loop: a few reads per readiness, and the
  // level-triggered loop comes back for the rest after the other connections' turns.
  for (int reads = 0; reads < 4; ++reads) {
    const ssize_t n = ::recv(c->fd, buffer, sizeof(buffer), 0);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Close(c);
    return;
  }
}

void Server::ReadAvailable(Connection* c) {
  const size_t limit = c->state == Connection::State::kHead
                           ? options_.max_head_bytes + 1
                           : static_cast<size_t>(options_.max_body) + kChunkedOverhead + 1;
  char buffer[16384];
  // A lingering client's bytes are dropped, not held: it may send forever, so at most this many
  // reads per readiness (the level-triggered loop comes back after the other connections).
  int reads_left = 64;
  while ((c->state == Connection::State::kLingering && reads_left-- > 0) || c->in.size() < limit) {
    const ssize_t n = ::recv(c->fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      c->quiet_since = loop_->clock().Now();
      if (c->state != Connection::State::kLingering) c->in.append(buffer, static_cast<size_t>(n));
      // A short read took what had arrived: asking again would cost a recv that says EAGAIN on
      // almost every request. The loop is level-triggered, so whatever comes next (an end of
      // input included) is reported again.
      if (static_cast<size_t>(n) < sizeof(buffer)) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // End of input or an error. A whole request already read is still answered.
    c->input_closed = true;
    if (n < 0 || c->state == Connection::State::kLingering) Close(c);
    return;
  }
}

void Server::Advance(Connection* c) {
  while (!c->dead) {
    if (c->state == Connection::State::kHead) {
      if (!AdvanceHead(c)) break;
    } else if (c->state == Connection::State::kBody) {
      if (!AdvanceBody(c)) break;
    } else {
      break;
    }
  }
  if (c->dead) return;
  if (c->input_closed &&
      (c->state == Connection::State::kHead || c->state == Connection::State::kBody)) {
    Close(c);  // the client left before sending a whole request
    return;
  }
  Rearm(c);
}

// Parses the head once it is whole; true when the connection moved on to its body.
bool Server::AdvanceHead(Connection* c) {
  if (c->in.empty()) return false;
  if (!c->request_deadline) c->request_deadline = loop_->clock().Now() + options_.request_timeout;
  const size_t head_end = FindHeadEnd(c->in);
  if (head_end == std::string::npos || head_end > options_.max_head_bytes) {
    if (c->in.size() > options_.max_head_bytes) {
      Refuse(c, 431, "request head over " + std::to_string(options_.max_head_bytes) + " bytes");
    }
    return false;
  }
  c->request = Request();
  if (auto problem = ParseRequestHead(std::string_view(c->in).substr(0, head_end), &c->request)) {
    Refuse(c, problem->status, problem->message);
    return false;
  }
  c->in.erase(0, head_end);
  c->head_only = c->request.method == "HEAD";
  c->keep_alive = c->request.keep_alive;
  // The declared size first, whatever the service: a body over the limit is never read.
  if (c->request.content_length.value_or(0) > options_.max_body) {
    Refuse(c, 413, "request body over " + std::to_string(options_.max_body) + " bytes");
    return false;
  }
  Service::Screening screening = service_->Screen(c->request);
  c->authenticated = screening.authenticated;
  if (screening.answer) {
    // Answered from the head: an announced body is not read, so nothing after it can be
    // told apart from it and the connection cannot carry another request.
    Response answer = std::move(*screening.answer);
    answer.close = answer.close || c->request.HasBody();
    c->state = Connection::State::kWaiting;
    Deliver(c->id, c->exchanges, std::move(answer));
    return false;
  }
  c->chunked = ChunkedState();
  c->state = Connection::State::kBody;
  if (c->request.HasBody() && c->in.empty()) {
    if (const std::string* expect = c->request.Header("expect");
        expect != nullptr && *expect == "100-continue") {
      Queue(c, "HTTP/1.1 100 Continue\r\n\r\n", false);
      if (c->dead) return false;
    }
  }
  return true;
}

// Reads the body the head announced; true when the request was handed to the service.
bool Server::AdvanceBody(Connection* c) {
  Request& request = c->request;
  if (request.chunked) {
    std::optional<HeadProblem> problem;
    const size_t used =
        DecodeChunked(c->in, options_.max_body, &request.body, &problem, &c->chunked);
    if (problem) {
      Refuse(c, problem->status, problem->message);
      return false;
    }
    if (used == 0) {
      if (c->in.size() > options_.max_body + kChunkedOverhead) {
        Refuse(c, 413, "request body over " + std::to_string(options_.max_body) + " bytes");
      }
      return false;
    }
    c->in.erase(0, used);
  } else {
    const size_t length = request.content_length.value_or(0);
    if (c->in.size() < length) return false;
    request.body = c->in.substr(0, length);
    c->in.erase(0, length);
  }
  Dispatch(c);
  return false;
}

void Server::Dispatch(Connection* c) {
  c->state = Connection::State::kWaiting;
  c->request_deadline.reset();
  // Reads stay on while the answer is awaited: turning them off and on again would cost two
  // epoll_ctl calls per request. They go off only when a pipelined request actually arrives
  // (OnReady), which then waits in the socket until this one is answered.
  auto exchange = std::make_shared<Responder::Exchange>();
  exchange->link = link_;
  exchange->connection_id = c->id;
  exchange->id = ++c->exchanges;
  c->exchange = exchange;
  Rearm(c);
  service_->Handle(std::move(c->request), Responder(std::move(exchange)));
}

void Server::Refuse(Connection* c, int status, std::string_view message) {
  Response refusal = service_->Refusal(status, message);
  refusal.close = true;
  c->in.clear();
  c->request_deadline.reset();
  c->state = Connection::State::kWriting;
  Queue(c, SerializeResponse(refusal), true);
}

Server::Connection* Server::Find(uint64_t connection_id, uint64_t exchange) {
  auto it = connections_.find(connection_id);
  if (it == connections_.end() || it->second->dead || it->second->exchanges != exchange) {
    return nullptr;
  }
  return it->second.get();
}

void Server::Deliver(uint64_t connection_id, uint64_t exchange, Response response) {
  Connection* c = Find(connection_id, exchange);
  if (c == nullptr || c->state != Connection::State::kWaiting) return;
  // After HEAD the client reads no body, so it cannot tell where a next answer would start.
  response.close = response.close || !c->keep_alive || c->head_only || c->input_closed;
  c->state = Connection::State::kWriting;
  c->answered = true;
  Queue(c, SerializeResponse(response, c->head_only), response.close);
}

void Server::DeliverStreamHead(uint64_t connection_id, uint64_t exchange, const Response& head) {
  Connection* c = Find(connection_id, exchange);
  if (c == nullptr || c->state != Connection::State::kWaiting) return;
  std::string bytes = SerializeStreamHead(head);
  c->exchange->queued.fetch_add(bytes.size(), std::memory_order_relaxed);
  c->state = Connection::State::kStreaming;
  c->answered = true;
  Queue(c, bytes, false);
}

void Server::DeliverStreamBytes(uint64_t connection_id, uint64_t exchange,
                                const std::string& bytes) {
  Connection* c = Find(connection_id, exchange);
  if (c == nullptr || c->state != Connection::State::kStreaming || c->stream_finished) return;
  Queue(c, bytes, false);
}

void Server::DeliverStreamEnd(uint64_t connection_id, uint64_t exchange) {
  Connection* c = Find(connection_id, exchange);
  if (c == nullptr || c->state != Connection::State::kStreaming) return;
  c->stream_finished = true;
  c->close_after = true;
  Flush(c);
}

void Server::Queue(Connection* c, std::string_view bytes, bool close_after) {
  if (c->out.empty()) c->quiet_since = loop_->clock().Now();  // the write deadline starts now
  c->out += bytes;
  c->close_after = c->close_after || close_after;
  Flush(c);
}

void Server::Flush(Connection* c) {
  while (c->sent < c->out.size()) {
    const ssize_t n = ::send(c->fd, c->out.data() + c->sent, c->out.size() - c->sent, MSG_NOSIGNAL);
    if (n > 0) {
      c->sent += static_cast<size_t>(n);
      c->quiet_since = loop_->clock().Now();
      if (c->state == Connection::State::kStreaming) {
        c->exchange->queued.fetch_sub(static_cast<size_t>(n), std::memory_order_relaxed);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // A stream also watches for its client leaving (DrainStreaming).
      c->watch->SetInterest(c->state == Connection::State::kStreaming
                                ? uint32_t{EventLoop::kWritable | EventLoop::kReadable}
                                : uint32_t{EventLoop::kWritable});
      Rearm(c);
      return;
    }
    Close(c);
    return;
  }
  c->out.clear();
  c->sent = 0;
  AfterWritten(c);
}

// Everything queued was taken.
void Server::AfterWritten(Connection* c) {
  if (c->close_after) {
    if (c->state == Connection::State::kStreaming) {
      Close(c);
    } else {
      Linger(c);
    }
    return;
  }
  if (c->state == Connection::State::kStreaming || c->state == Connection::State::kBody) {
    // More stream bytes may come (and the client may leave: DrainStreaming); a 100 Continue was
    // sent and the body is awaited.
    c->watch->SetInterest(EventLoop::kReadable);
    Rearm(c);
    return;
  }
  if (c->state != Connection::State::kWriting) return;
  // The answer is out: the next request. What of it was already read is parsed now; what is
  // still in the socket (a pipelined request, an end of input) the level-triggered loop reports
  // on its next turn. A recv here would almost always say EAGAIN: a client that waits for each
  // answer has not sent its next request yet, and that recv was a syscall per request.
  c->state = Connection::State::kHead;
  c->exchange.reset();
  c->request_deadline.reset();
  c->watch->SetInterest(EventLoop::kReadable);
  Advance(c);
}

void Server::Linger(Connection* c) {
  // Half-close and drain what the client still sends, so the answer is not lost to a reset.
  ::shutdown(c->fd, SHUT_WR);
  c->state = Connection::State::kLingering;
  c->in.clear();
  c->linger_until = loop_->clock().Now() + options_.linger_timeout;
  c->watch->SetInterest(EventLoop::kReadable);
  if (c->input_closed) {
    Close(c);
    return;
  }
  Rearm(c);
}

void Server::Rearm(Connection* c) {
  switch (c->state) {
    case Connection::State::kHead:
      if (c->request_deadline) {
        c->timer->ArmAt(*c->request_deadline);
      } else if (c->answered) {
        c->timer->ArmAt(c->quiet_since + (c->authenticated
                                              ? options_.idle_timeout
                                              : options_.unauthenticated_idle_timeout));
      } else {
        c->timer->ArmAt(c->quiet_since + options_.head_timeout);
      }
      return;
    case Connection::State::kBody:
      c->timer->ArmAt(c->request_deadline.value_or(c->quiet_since + options_.request_timeout));
      return;
    case Connection::State::kWaiting:
      c->timer->Cancel();  // the service's own deadlines apply
      return;
    case Connection::State::kWriting:
    case Connection::State::kStreaming:
      if (c->out.empty()) {
        c->timer->Cancel();
      } else {
        c->timer->ArmAt(c->quiet_since + options_.write_timeout);
      }
      return;
    case Connection::State::kLingering:
      c->timer->ArmAt(c->linger_until);
      return;
  }
}

void Server::OnDeadline(Connection* c) {
  if (c->dead) return;
  const SteadyTime now = loop_->clock().Now();
  switch (c->state) {
    case Connection::State::kHead:
    case Connection::State::kBody:
      if (c->request_deadline && *c->request_deadline <= now) {
        Refuse(c, 408, "the request did not arrive in time");
        return;
      }
      if (!c->request_deadline && c->in.empty()) {
        Close(c);  // idle, or a new connection that never spoke
        return;
      }
      break;
    case Connection::State::kWriting:
    case Connection::State::kStreaming:
    case Connection::State::kLingering:
      Close(c);  // the client does not take its answer, or the linger ended
      return;
    case Connection::State::kWaiting:
      break;
  }
  Rearm(c);
}

void Server::Close(Connection* c) {
  if (c->dead) return;
  c->dead = true;
  --live_;
  if (c->exchange) c->exchange->gone.store(true, std::memory_order_release);
  c->watch.reset();
  c->timer.reset();
  ::close(c->fd);
  c->fd = -1;
  // Freed on the loop's next turn: callers up the stack may still hold `c`.
  const uint64_t id = c->id;
  std::weak_ptr<ServerLink> weak = link_;
  loop_->Post([weak, id] {
    const std::shared_ptr<ServerLink> link = weak.lock();
    if (!link) return;
    Server* server = link->server.load(std::memory_order_acquire);
    if (server != nullptr) server->connections_.erase(id);
  });
}

}  // namespace streamcar::http
