#include "sidecar/delivery/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "sidecar/common/log.h"
#include "sidecar/common/tls_util.h"
#include "sidecar/common/unique_fd.h"
#include "sidecar/common/version.h"

namespace streamcar::delivery {
namespace {

using Kind = HandlerResponse::Kind;

constexpr Millis kMaxConnect{2000};
constexpr size_t kReadChunk = size_t{16} * 1024;
// A request buffer larger than this is freed once written rather than kept for the next one.
constexpr size_t kKeepBufferBytes = size_t{64} * 1024;

// What a connection with no answer outstanding holds (the blocking client's CheckIdle).
enum class Idle { kClean, kUnread, kClosed };

Idle PeekIdle(int fd) {
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return Idle::kUnread;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Idle::kClean;
  return Idle::kClosed;  // the peer's EOF, or an error
}

// One read or write that does not wait, on a plain socket or a TLS session over it.
struct Io {
  enum class Kind { kData, kWait, kEnd, kFailed };
  Kind kind = Kind::kWait;
  size_t bytes = 0;
  std::string error;
};

Io Failed(std::string error) { return Io{Io::Kind::kFailed, 0, std::move(error)}; }

Io WriteSomeBytes(int fd, SSL* ssl, const char* data, size_t size) {
  if (ssl != nullptr) {
    ERR_clear_error();
    const int n = SSL_write(ssl, data, static_cast<int>(std::min<size_t>(size, 1 << 30)));
    if (n > 0) return Io{Io::Kind::kData, static_cast<size_t>(n), {}};
    const int error = SSL_get_error(ssl, n);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return Io{};
    if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN) {
      ERR_clear_error();
      return Failed("TLS write failed: connection lost");
    }
    return Failed("TLS write refused: " + TakeOpenSslError());
  }
  while (true) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n > 0) return Io{Io::Kind::kData, static_cast<size_t>(n), {}};
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Io{};
    return Failed(std::string("send failed: ") +
                  (n < 0 ? std::strerror(errno) : "nothing written"));
  }
}

Io ReadSomeBytes(int fd, SSL* ssl, char* buffer, size_t size) {
  if (ssl != nullptr) {
    ERR_clear_error();
    const int n = SSL_read(ssl, buffer, static_cast<int>(std::min<size_t>(size, 1 << 30)));
    if (n > 0) return Io{Io::Kind::kData, static_cast<size_t>(n), {}};
    const int error = SSL_get_error(ssl, n);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return Io{};
    // The end of the TLS session, clean or not: the parser decides whether an answer that runs
    // to the end of the connection was complete (as the blocking client does).
    if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN) {
      ERR_clear_error();
      return Io{Io::Kind::kEnd, 0, {}};
    }
    return Failed("TLS read refused: " + TakeOpenSslError());
  }
  while (true) {
    const ssize_t n = ::recv(fd, buffer, size, 0);
    if (n > 0) return Io{Io::Kind::kData, static_cast<size_t>(n), {}};
    if (n == 0) return Io{Io::Kind::kEnd, 0, {}};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Io{};
    return Failed(std::string("connection lost: ") + std::strerror(errno));
  }
}

// CheckIdle over TLS: a read that must not wait. TLS 1.3 session tickets are consumed without
// surfacing (not "unsolicited"); any application byte, the end of the session or an error makes
// the connection unusable.
Idle CheckIdle(int fd, SSL* ssl) {
  if (ssl == nullptr) return PeekIdle(fd);
  char byte;
  const Io io = ReadSomeBytes(fd, ssl, &byte, 1);
  if (io.kind == Io::Kind::kData) return Idle::kUnread;
  return io.kind == Io::Kind::kWait ? Idle::kClean : Idle::kClosed;
}

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

// For an https:// target: verified against the system trust store (SSL_CERT_FILE / SSL_CERT_DIR
// are honoured), TLS 1.2 at least; the name is checked per connection.
StatusOr<std::shared_ptr<SSL_CTX>> MakeTlsContext(const HttpTarget& target) {
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SslCtxFree());
  if (ctx == nullptr) return Status(StatusCode::kInvalid, "TLS: " + TakeOpenSslError());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
    return Status(StatusCode::kInvalid, "TLS: cannot load the system trust store for " +
                                            target.origin + ": " + TakeOpenSslError());
  }
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return ctx;
}

HandlerResponse Failure(Kind kind, std::string error) {
  HandlerResponse response;
  response.kind = kind;
  response.error = std::move(error);
  return response;
}

const std::string& UserAgent() {
  static const std::string user_agent = std::string("streamcar/") + kVersion;
  return user_agent;
}

}  // namespace

struct Http1Client::ResolverLink {
  std::mutex mutex;
  EventLoop* loop = nullptr;  // null once the client is gone: the result is dropped
};

struct Http1Client::Pool {
  Pool(HttpTarget target, size_t limit) : target(std::move(target)), limit(limit) {}
  HttpTarget target;
  size_t limit;
  size_t busy = 0;  // requests outstanding (each holds one connection)
  bool resolved = false;
  bool resolving = false;  // a resolution thread runs for this pool
  std::vector<ResolvedAddress> addresses;
  std::vector<std::unique_ptr<Connection>> connections;
  std::vector<Connection*> idle;  // most recently used last
  std::shared_ptr<SSL_CTX> tls;   // https:// only
};

struct Http1Client::Connection {
  // [kResolving] → kConnecting → [kHandshaking, https] → kWriting → kAwaiting → kIdle → kWriting
  // …; any failure closes it.
  enum class State { kResolving, kConnecting, kHandshaking, kIdle, kWriting, kAwaiting };

  explicit Connection(Pool* pool) : pool(pool) {}

  Pool* pool;
  State state = State::kConnecting;
  // Declared before `watch`, so the watch is removed before the socket is closed.
  UniqueFd fd;
  std::unique_ptr<EventLoop::FdWatch> watch;
  std::unique_ptr<SSL, SslFree> ssl;  // https:// only; freed before the socket closes
  std::unique_ptr<EventLoop::Timer> timer;
  size_t next_address = 0;
  // The request being carried.
  std::string out;
  size_t written = 0;
  http1::ResponseParser parser;
  Done done;
  Millis timeout{0};
  SteadyTime deadline;
};

StatusOr<std::unique_ptr<Http1Client>> Http1Client::Create(EventLoop& loop, HttpTarget handler,
                                                           std::optional<HttpTarget> health,
                                                           size_t concurrency, Resolver resolver) {
  if (concurrency == 0) return Status(StatusCode::kInvalid, "concurrency must be at least 1");
  std::unique_ptr<Http1Client> client(new Http1Client(loop, std::move(handler), std::move(health),
                                                      concurrency, std::move(resolver)));
  for (Pool* pool : {client->handler_.get(), client->health_.get()}) {
    if (!pool->target.tls) continue;
    auto ctx = MakeTlsContext(pool->target);
    if (!ctx.ok()) return ctx.status();
    pool->tls = std::move(*ctx);
  }
  return client;
}

Http1Client::Http1Client(EventLoop& loop, HttpTarget handler, std::optional<HttpTarget> health,
                         size_t concurrency, Resolver resolver)
    : loop_(loop),
      resolver_(std::move(resolver)),
      link_(std::make_shared<ResolverLink>()),
      epoch_(std::make_shared<uint64_t>(0)) {
  link_->loop = &loop;
  health_ = std::make_unique<Pool>(health ? std::move(*health) : handler, 1);
  handler_ = std::make_unique<Pool>(std::move(handler), concurrency);
  in_.resize(kReadChunk);
}

Http1Client::~Http1Client() {
  {
    std::lock_guard lock(link_->mutex);
    link_->loop = nullptr;
  }
  Abandon();
}

void Http1Client::Abandon() {
  for (Pool* pool : {handler_.get(), health_.get()}) {
    pool->idle.clear();
    pool->connections.clear();  // removes watches and timers, closes sockets
    pool->busy = 0;
    pool->resolving = false;  // a result still coming is dropped (the epoch below)
  }
  probe_waiters_.clear();
  ++*epoch_;  // deferred callbacks posted before now never run
}

size_t Http1Client::free_slots() const { return handler_->limit - handler_->busy; }

bool Http1Client::Send(HttpRequest&& request, Millis timeout, Done done) {
  if (handler_->busy >= handler_->limit) return false;
  http1::RequestHead head;
  head.method = "POST";
  head.target = handler_->target.path;
  head.authority = handler_->target.authority;
  head.user_agent = UserAgent();
  head.content_type = request.content_type;
  head.headers = &request.headers;
  head.has_body = true;
  std::string out;
  if (Status s = http1::SerializeRequest(head, request.body, &out); !s.ok()) {
    // Nothing is sent: the request itself would have broken the framing.
    LogError("refused to send a request that would break HTTP framing",
             {{"url", handler_->target.origin}, {"error", s.message()}});
    Defer(std::move(done), Failure(Kind::kError, "request not sent: " + s.message()));
    return true;
  }
  Start(*handler_, std::move(out), timeout, std::move(done));
  return true;
}

void Http1Client::Probe(Millis timeout, std::function<void(bool healthy)> done) {
  probe_waiters_.push_back(std::move(done));
  if (probe_waiters_.size() > 1) return;  // shares the answer of the probe in flight
  Done finish = [this](const HandlerResponse& response) {
    const bool healthy =
        response.kind == Kind::kAnswered && response.status >= 200 && response.status < 300;
    std::vector<std::function<void(bool)>> waiters = std::move(probe_waiters_);
    probe_waiters_.clear();
    for (auto& waiter : waiters) waiter(healthy);
  };
  http1::RequestHead head;
  head.method = "GET";
  head.target = health_->target.path;
  head.authority = health_->target.authority;
  head.user_agent = UserAgent();
  std::string out;
  if (Status s = http1::SerializeRequest(head, {}, &out); !s.ok()) {
    Defer(std::move(finish), Failure(Kind::kError, "request not sent: " + s.message()));
    return;
  }
  Start(*health_, std::move(out), timeout, std::move(finish));
}

void Http1Client::Start(Pool& pool, std::string out, Millis timeout, Done done) {
  const SteadyTime now = loop_.clock().Now();
  Connection* connection = TakeIdle(pool);
  if (connection == nullptr) {
    auto owned = std::make_unique<Connection>(&pool);
    Connection* fresh = owned.get();
    owned->timer = loop_.CreateTimer([this, fresh] { OnTimer(fresh); });
    std::string why;
    if (!pool.resolved && IsIpAddress(pool.target.host)) {
      // A literal address: getaddrinfo only converts it, no I/O.
      auto addresses = resolver_(pool.target.host, pool.target.port, pool.target.origin);
      if (addresses.ok()) {
        pool.addresses = std::move(*addresses);
        pool.resolved = true;
      } else {
        why = addresses.status().message();
      }
    }
    if (!pool.resolved && why.empty()) {
      fresh->state = Connection::State::kResolving;  // connects once the name is resolved
      if (!pool.resolving) StartResolving(pool);
    } else if (pool.resolved && !ConnectNext(fresh, &why)) {
      pool.resolved = false;  // resolved again for the next attempt
    }
    if (fresh->state != Connection::State::kResolving && fresh->watch == nullptr) {
      // Refused at once (the caller learns it from the loop, never inside Send).
      Defer(std::move(done), Failure(Kind::kRefused, std::move(why)));
      return;
    }
    pool.connections.push_back(std::move(owned));
    connection = fresh;
  }
  ++pool.busy;
  connection->out = std::move(out);
  connection->written = 0;
  connection->done = std::move(done);
  connection->timeout = timeout;
  connection->deadline = now + timeout;
  connection->parser.Reset();
  if (connection->state == Connection::State::kConnecting ||
      connection->state == Connection::State::kResolving) {
    connection->timer->ArmAt(std::min(connection->deadline, now + kMaxConnect));
    return;
  }
  // Written at once (no loop round, no change of interest for a request that fits the socket
  // buffer); the rest waits for kWritable.
  connection->state = Connection::State::kWriting;
  connection->timer->ArmAt(connection->deadline);
  WriteSome(connection, /*inside_send=*/true);
}

Http1Client::Connection* Http1Client::TakeIdle(Pool& pool) {
  while (!pool.idle.empty()) {
    Connection* connection = pool.idle.back();
    pool.idle.pop_back();
    // Bytes on a connection with no request outstanding: an unsolicited answer is never taken
    // for the next request's. The end of the connection is an idle timeout on the handler's side.
    const Idle idle = CheckIdle(connection->fd.get(), connection->ssl.get());
    if (idle == Idle::kClean) return connection;
    if (idle == Idle::kUnread) {
      LogWarn("handler sent bytes while no request was outstanding; connection closed",
              {{"url", pool.target.origin}});
    }
    Close(connection);
  }
  return nullptr;
}

void Http1Client::StartResolving(Pool& pool) {
  pool.resolving = true;
  // Runs `result` on the loop unless the client was abandoned or destroyed meanwhile.
  auto post_result = [this, pool = &pool, epoch = std::weak_ptr<uint64_t>(epoch_), at = *epoch_](
                         EventLoop& loop, StatusOr<std::vector<ResolvedAddress>> result) {
    loop.Post([this, pool, epoch, at, result = std::move(result)]() mutable {
      const std::shared_ptr<uint64_t> alive = epoch.lock();
      if (alive == nullptr || *alive != at) return;
      OnResolved(*pool, std::move(result));
    });
  };
  try {
    std::thread([resolver = resolver_, link = link_, host = pool.target.host,
                 port = pool.target.port, origin = pool.target.origin, post_result] {
      auto addresses = resolver(host, port, origin);
      std::lock_guard lock(link->mutex);
      if (link->loop == nullptr) return;  // the client is gone
      post_result(*link->loop, std::move(addresses));
    }).detach();
  } catch (const std::system_error& error) {
    // No thread to be had (a container's pids limit): the requests waiting are refused, and the
    // next one tries again.
    post_result(loop_, ResolveFailure(pool.target.host, pool.target.origin, error.what()));
  }
}

void Http1Client::OnResolved(Pool& pool, StatusOr<std::vector<ResolvedAddress>> addresses) {
  pool.resolving = false;
  if (addresses.ok()) {
    pool.addresses = std::move(*addresses);
    pool.resolved = true;
  }
  // The requests that waited, as they are now: a callback run by one may send another.
  std::vector<Connection*> waiting;
  for (const auto& connection : pool.connections) {
    if (connection->state == Connection::State::kResolving) waiting.push_back(connection.get());
  }
  for (Connection* connection : waiting) {
    const bool present =
        std::any_of(pool.connections.begin(), pool.connections.end(),
                    [connection](const auto& owned) { return owned.get() == connection; });
    if (!present || connection->state != Connection::State::kResolving) continue;
    if (!addresses.ok()) {
      Fail(connection, Kind::kRefused, addresses.status().message());
      continue;
    }
    ConnectResolved(connection);
  }
}

void Http1Client::ConnectResolved(Connection* connection) {
  std::string why;
  if (ConnectNext(connection, &why)) return;  // kConnecting; its timer is armed already
  connection->pool->resolved = false;
  Fail(connection, Kind::kRefused, std::move(why));
}

bool Http1Client::ConnectNext(Connection* connection, std::string* why) {
  const Pool& pool = *connection->pool;
  const std::string prefix = "cannot connect to " + pool.target.origin + ": ";
  if (pool.addresses.empty()) *why = prefix + "no address";
  while (connection->next_address < pool.addresses.size()) {
    const ResolvedAddress& address = pool.addresses[connection->next_address++];
    connection->ssl.reset();
    connection->watch.reset();
    connection->fd = UniqueFd();
    UniqueFd fd(::socket(address.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
      *why = prefix + "socket: " + std::strerror(errno);
      continue;
    }
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) !=
            0 &&
        errno != EINPROGRESS) {
      *why = prefix + std::strerror(errno);
      continue;
    }
    auto watch = loop_.Watch(fd.get(), EventLoop::kWritable,
                             [this, connection](uint32_t ready) { OnEvent(connection, ready); });
    if (!watch.ok()) {
      *why = prefix + watch.status().message();
      continue;
    }
    connection->fd = std::move(fd);
    connection->watch = std::move(*watch);
    connection->state = Connection::State::kConnecting;
    return true;
  }
  return false;
}

void Http1Client::OnEvent(Connection* connection, uint32_t ready) {
  switch (connection->state) {
    case Connection::State::kResolving:
      return;  // no socket yet: nothing to watch
    case Connection::State::kConnecting:
      OnConnectEvent(connection);
      return;
    case Connection::State::kHandshaking:
      Handshake(connection);
      return;
    case Connection::State::kIdle:
      OnIdleEvent(connection);
      return;
    case Connection::State::kWriting:
      if ((ready & EventLoop::kWritable) != 0 && !WriteSome(connection)) return;
      if (connection->state == Connection::State::kWriting) {
        // Readable while the request is still being written: the peer answered (or closed)
        // before it could have read the whole request, so that answer is not this request's.
        if ((ready & (EventLoop::kReadable | EventLoop::kHangup)) != 0 &&
            CheckIdle(connection->fd.get(), connection->ssl.get()) != Idle::kClean) {
          LogWarn("handler answered before the request was fully sent; connection closed",
                  {{"url", connection->pool->target.origin}});
          Fail(connection, Kind::kError,
               "the handler answered (or closed) before the request was fully sent");
        }
        return;
      }
      if ((ready & (EventLoop::kReadable | EventLoop::kHangup)) == 0) return;
      ReadAnswer(connection);
      return;
    case Connection::State::kAwaiting:
      ReadAnswer(connection);
      return;
  }
}

void Http1Client::OnConnectEvent(Connection* connection) {
  int error = 0;
  socklen_t length = sizeof(error);
  if (::getsockopt(connection->fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
    error = errno;
  }
  if (error != 0) {
    std::string why =
        "cannot connect to " + connection->pool->target.origin + ": " + std::strerror(error);
    if (ConnectNext(connection, &why)) return;
    connection->pool->resolved = false;  // resolved again for the next attempt
    Fail(connection, Kind::kRefused, std::move(why));
    return;
  }
  const int one = 1;
  ::setsockopt(connection->fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(connection->fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  if (connection->pool->tls != nullptr) {
    StartTls(connection);
    return;
  }
  ++connections_opened_;
  connection->state = Connection::State::kWriting;
  connection->timer->ArmAt(connection->deadline);
  connection->watch->SetInterest(EventLoop::kReadable | EventLoop::kWritable);
  WriteSome(connection);
}

void Http1Client::StartTls(Connection* connection) {
  const HttpTarget& target = connection->pool->target;
  ERR_clear_error();
  connection->ssl.reset(SSL_new(connection->pool->tls.get()));
  if (connection->ssl == nullptr || SSL_set_fd(connection->ssl.get(), connection->fd.get()) != 1) {
    Fail(connection, Kind::kRefused, "TLS with " + target.origin + ": " + TakeOpenSslError());
    return;
  }
  SSL* ssl = connection->ssl.get();
  if (IsIpAddress(target.host)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), target.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, target.host.c_str());  // SNI
    SSL_set1_host(ssl, target.host.c_str());
  }
  connection->state = Connection::State::kHandshaking;
  Handshake(connection);
}

void Http1Client::Handshake(Connection* connection) {
  SSL* ssl = connection->ssl.get();
  ERR_clear_error();
  const int rc = SSL_connect(ssl);
  if (rc == 1) {
    ++connections_opened_;
    connection->state = Connection::State::kWriting;
    connection->timer->ArmAt(connection->deadline);
    connection->watch->SetInterest(EventLoop::kReadable | EventLoop::kWritable);
    WriteSome(connection);
    return;
  }
  const int error = SSL_get_error(ssl, rc);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
    connection->watch->SetInterest(error == SSL_ERROR_WANT_READ ? EventLoop::kReadable
                                                                : EventLoop::kWritable);
    return;
  }
  const HttpTarget& target = connection->pool->target;
  std::string why;
  const long verify = SSL_get_verify_result(ssl);  // NOLINT(google-runtime-int): OpenSSL's type
  if (verify != X509_V_OK) {
    why = "TLS: the certificate of " + target.origin + " is not trusted for \"" + target.host +
          "\": " + X509_verify_cert_error_string(verify);
    ERR_clear_error();
  } else if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN) {
    ERR_clear_error();
    why = "TLS handshake with " + target.origin + ": connection closed (is it a TLS port?)";
  } else {
    why = "TLS handshake with " + target.origin + " failed: " + TakeOpenSslError();
  }
  Fail(connection, Kind::kRefused, std::move(why));
}

void Http1Client::OnIdleEvent(Connection* connection) {
  const Idle idle = CheckIdle(connection->fd.get(), connection->ssl.get());
  if (idle == Idle::kClean) return;
  if (idle == Idle::kUnread) {
    LogWarn("handler sent bytes while no request was outstanding; connection closed",
            {{"url", connection->pool->target.origin}});
  }
  Close(connection);
}

void Http1Client::OnTimer(Connection* connection) {
  if (connection->state == Connection::State::kResolving) {
    const HttpTarget& target = connection->pool->target;
    Fail(connection, Kind::kRefused,
         ResolveFailure(target.host, target.origin, "timed out").message());
    return;
  }
  if (connection->state == Connection::State::kConnecting ||
      connection->state == Connection::State::kHandshaking) {
    Fail(connection, Kind::kRefused,
         "cannot connect to " + connection->pool->target.origin + ": connect timed out");
    return;
  }
  if (connection->state == Connection::State::kIdle) return;
  Fail(connection, Kind::kTimeout,
       "no answer within " + std::to_string(connection->timeout.count()) + "ms");
}

bool Http1Client::WriteSome(Connection* connection, bool inside_send) {
  while (connection->written < connection->out.size()) {
    Io io = WriteSomeBytes(connection->fd.get(), connection->ssl.get(),
                           connection->out.data() + connection->written,
                           connection->out.size() - connection->written);
    if (io.kind == Io::Kind::kData) {
      connection->written += io.bytes;
      continue;
    }
    if (io.kind == Io::Kind::kWait) {
      // kWritable (or, for TLS, kReadable) comes.
      connection->watch->SetInterest(EventLoop::kReadable | EventLoop::kWritable);
      return true;
    }
    if (inside_send) {
      // Reported from the loop, never inside Send.
      Done done = std::move(connection->done);
      --connection->pool->busy;
      Close(connection);
      Defer(std::move(done), Failure(Kind::kError, std::move(io.error)));
      return false;
    }
    Fail(connection, Kind::kError, std::move(io.error));
    return false;
  }
  if (connection->out.capacity() > kKeepBufferBytes) {
    std::string().swap(connection->out);
  } else {
    connection->out.clear();
  }
  connection->state = Connection::State::kAwaiting;
  connection->watch->SetInterest(EventLoop::kReadable);
  return true;
}

void Http1Client::ReadAnswer(Connection* connection) {
  http1::ResponseParser& parser = connection->parser;
  const std::string& origin = connection->pool->target.origin;
  bool ended = false;
  while (!parser.complete()) {
    Io io = ReadSomeBytes(connection->fd.get(), connection->ssl.get(), in_.data(), in_.size());
    if (io.kind == Io::Kind::kWait) return;  // the rest comes later
    if (io.kind == Io::Kind::kFailed) {
      Fail(connection, Kind::kError, std::move(io.error));
      return;
    }
    if (io.kind == Io::Kind::kEnd) {
      ended = true;
      parser.FeedEof();
      if (parser.failed()) {
        Fail(connection, Kind::kError, parser.error());
        return;
      }
      break;
    }
    const size_t received = io.bytes;
    const size_t used = parser.Feed(std::string_view(in_.data(), received));
    if (parser.failed()) {
      LogWarn("malformed answer from the handler; connection closed",
              {{"url", origin}, {"error", parser.error()}});
      Fail(connection, Kind::kError, "malformed answer: " + parser.error());
      return;
    }
    if (parser.complete() && used < received) {
      LogWarn("handler sent bytes after its answer; connection closed, the request will be retried",
              {{"url", origin}, {"extra_bytes", static_cast<int64_t>(received - used)}});
      Fail(connection, Kind::kError,
           "the handler sent " + std::to_string(received - used) + " bytes after its answer");
      return;
    }
  }
  http1::Response& answer = parser.response();
  HandlerResponse response;
  response.kind = Kind::kAnswered;
  response.status = answer.status;
  if (const std::string* retry_after = answer.Find("Retry-After")) {
    response.retry_after = *retry_after;
  }
  response.body = std::move(answer.body);
  Finish(connection, std::move(response), answer.keep_alive && !ended);
}

void Http1Client::Finish(Connection* connection, HandlerResponse response, bool keep) {
  Pool& pool = *connection->pool;
  Done done = std::move(connection->done);
  connection->done = nullptr;
  --pool.busy;
  if (keep) {
    connection->timer->Cancel();
    connection->state = Connection::State::kIdle;
    connection->watch->SetInterest(EventLoop::kReadable);
    pool.idle.push_back(connection);
  } else {
    Close(connection);
  }
  done(std::move(response));
}

void Http1Client::Fail(Connection* connection, Kind kind, std::string error) {
  Finish(connection, Failure(kind, std::move(error)), /*keep=*/false);
}

void Http1Client::Close(Connection* connection) {
  Pool& pool = *connection->pool;
  std::erase(pool.idle, connection);
  std::erase_if(pool.connections, [connection](const std::unique_ptr<Connection>& owned) {
    return owned.get() == connection;
  });
}

void Http1Client::Defer(Done done, HandlerResponse response) {
  loop_.Post([epoch = std::weak_ptr<uint64_t>(epoch_), at = *epoch_, done = std::move(done),
              response = std::move(response)]() mutable {
    const std::shared_ptr<uint64_t> alive = epoch.lock();
    if (alive == nullptr || *alive != at) return;  // abandoned or destroyed since
    done(std::move(response));
  });
}

}  // namespace streamcar::delivery
