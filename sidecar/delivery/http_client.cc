#include "sidecar/delivery/http_client.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "sidecar/common/check.h"
#include "sidecar/common/log.h"
#include "sidecar/common/tls_util.h"
#include "sidecar/common/version.h"
#include "sidecar/delivery/http_client_parts.h"

namespace streamcar::delivery {
namespace {

using Kind = HandlerResponse::Kind;

constexpr Millis kMaxConnect{2000};
constexpr size_t kReadChunk = size_t{16} * 1024;
// A request buffer larger than this is freed once written rather than kept for the next one.
constexpr size_t kKeepBufferBytes = size_t{64} * 1024;

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

StatusOr<std::unique_ptr<Http1Client>> Http1Client::Create(EventLoop& loop, HttpTarget handler,
                                                           std::optional<HttpTarget> health,
                                                           size_t concurrency, Resolver resolver) {
  if (concurrency == 0) return Status(StatusCode::kInvalid, "concurrency must be at least 1");
  std::unique_ptr<Http1Client> client(new Http1Client(loop, std::move(handler), std::move(health),
                                                      concurrency, std::move(resolver)));
  for (Pool* pool : {client->handlers_.front().get(), client->health_.get()}) {
    if (Status s = client->LoadTrust(*pool); !s.ok()) return s;
  }
  return client;
}

Status Http1Client::AddTarget(HttpTarget target) {
  auto pool = std::make_unique<Pool>(std::move(target), handlers_.front()->limit);
  if (Status s = LoadTrust(*pool); !s.ok()) return s;
  handlers_.push_back(std::move(pool));
  return Status::Ok();
}

Status Http1Client::LoadTrust(Pool& pool) {
  if (!pool.target.tls) return Status::Ok();
  auto ctx = MakeTlsContext(pool.target);
  if (!ctx.ok()) return ctx.status();
  pool.tls = std::move(*ctx);
  return Status::Ok();
}

Http1Client::Http1Client(EventLoop& loop, HttpTarget handler, std::optional<HttpTarget> health,
                         size_t concurrency, Resolver resolver)
    : loop_(loop),
      resolver_(std::move(resolver)),
      link_(std::make_shared<ResolverLink>()),
      epoch_(std::make_shared<uint64_t>(0)) {
  link_->loop = &loop;
  health_ = std::make_unique<Pool>(health ? std::move(*health) : handler, 1);
  handlers_.push_back(std::make_unique<Pool>(std::move(handler), concurrency));
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
  std::vector<Pool*> pools = {health_.get()};
  for (const auto& handler : handlers_) pools.push_back(handler.get());
  for (Pool* pool : pools) {
    pool->idle.clear();
    pool->connections.clear();  // removes watches and timers, closes sockets
    pool->busy = 0;
    pool->resolving = false;  // a result still coming is dropped (the epoch below)
  }
  probe_waiters_.clear();
  ++*epoch_;  // deferred callbacks posted before now never run
}

size_t Http1Client::busy() const {
  size_t busy = 0;
  for (const auto& handler : handlers_) busy += handler->busy;
  return busy;
}

size_t Http1Client::free_slots() const { return handlers_.front()->limit - busy(); }

bool Http1Client::Send(HttpRequest&& request, Millis timeout, Done done) {
  if (free_slots() == 0) return false;
  if (!SC_DCHECK(request.target < handlers_.size(),
                 "no handler target " + std::to_string(request.target))) {
    Defer(std::move(done), Failure(Kind::kError, "request not sent: no such handler target"));
    return true;
  }
  Pool& pool = *handlers_[request.target];
  if (auth_) auth_->AddHeaders(request.body, loop_.clock(), &request.headers);
  http1::RequestHead head;
  head.method = "POST";
  head.target = pool.target.path;
  head.authority = pool.target.authority;
  head.user_agent = UserAgent();
  head.content_type = request.content_type;
  head.headers = &request.headers;
  head.has_body = true;
  std::string out;
  if (Status s = http1::SerializeRequest(head, request.body, &out); !s.ok()) {
    // Nothing is sent: the request itself would have broken the framing.
    LogError("refused to send a request that would break HTTP framing",
             {{"url", pool.target.origin}, {"error", s.message()}});
    Defer(std::move(done), Failure(Kind::kError, "request not sent: " + s.message()));
    return true;
  }
  Start(pool, std::move(out), timeout, std::move(done));
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
  http1::HeaderList headers;
  if (auth_) auth_->AddHeaders({}, loop_.clock(), &headers);
  head.headers = &headers;
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
    if (!pool.resolved && (IsIpAddress(pool.target.host) || !pool.target.unix_socket.empty())) {
      // A literal address (getaddrinfo only converts it) or a Unix socket: no I/O.
      auto addresses = pool.target.unix_socket.empty()
                           ? resolver_(pool.target.host, pool.target.port, pool.target.origin)
                           : UnixSocketAddress(pool.target.unix_socket);
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
    // Inside a loop round, a plain socket's idle watch already says it (level-triggered: any byte
    // or end that came before the round's poll is reported, and OnIdleEvent closes the
    // connection), so a quiet one is reused without a syscall; TLS may hold a record in OpenSSL's
    // buffer that the socket no longer shows, and outside a round the socket is asked. Either way
    // what arrives after the check and before the request is written cannot be told apart from
    // the answer: the peek never closed that window, only this one is a round wide.
    const bool quiet = connection->ssl == nullptr && connection->watch->KnownQuiet();
    const Idle idle = quiet ? Idle::kClean : CheckIdle(connection->fd.get(), connection->ssl.get());
    if (idle == Idle::kClean) return connection;
    if (idle == Idle::kUnread) {
      LogWarn("handler sent bytes while no request was outstanding; connection closed",
              {{"url", pool.target.origin}});
    }
    Close(connection);
  }
  return nullptr;
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
      ReadAnswer(connection, ready);
      return;
    case Connection::State::kAwaiting:
      ReadAnswer(connection, ready);
      return;
  }
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
  connection->watch->SetInterest(EventLoop::kReadable | EventLoop::kPeerClosed);
  return true;
}

void Http1Client::ReadAnswer(Connection* connection, uint32_t ready) {
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
  if (answer.body_over_cap) {
    // A success all the same (SPEC 3.2); the rest of the body is left unread with the connection.
    LogDebug("handler's 2xx answer has a body over the cap; counted without it, connection closed",
             {{"url", origin}, {"status", static_cast<int64_t>(answer.status)}});
  }
  // The handler ended its side with the answer (kPeerClosed: at this round's poll): the
  // connection is not kept, as the peek found before (KnownQuiet cannot see an end already
  // given to this callback).
  const bool peer_closed = (ready & EventLoop::kPeerClosed) != 0;
  Finish(connection, std::move(response), answer.keep_alive && !ended && !peer_closed);
}

void Http1Client::Finish(Connection* connection, HandlerResponse response, bool keep) {
  Pool& pool = *connection->pool;
  Done done = std::move(connection->done);
  connection->done = nullptr;
  --pool.busy;
  if (keep) {
    connection->timer->Cancel();
    connection->state = Connection::State::kIdle;
    connection->watch->SetInterest(EventLoop::kReadable | EventLoop::kPeerClosed);
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
