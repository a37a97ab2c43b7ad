#include "sidecar/delivery/http_deliverer.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sidecar/common/log.h"
#include "sidecar/common/version.h"
#include "sidecar/redis/socket_util.h"
#include "sidecar/redis/tls_transport.h"
#include "sidecar/redis/transport.h"

namespace streamcar::delivery {

// What an idle kept-alive connection holds before a request is sent on it.
enum class Idle { kClean, kUnread, kClosed };

class HttpDeliverer::Connection {
 public:
  virtual ~Connection() = default;
  // Writes all of `data` before `deadline`. kProtocol when the peer answered before the last byte
  // was written (an answer to a request it has not seen), kIo when the connection broke.
  virtual Status Write(std::string_view data, SteadyTime deadline) = 0;
  // Reads some bytes before `deadline`; 0 is the end of the connection.
  virtual StatusOr<size_t> Read(char* buffer, size_t size, SteadyTime deadline) = 0;
  // Without blocking: does the connection hold unread bytes, or has the peer closed it?
  virtual Idle CheckIdle() = 0;
};

namespace {

constexpr Millis kMaxConnect{2000};
constexpr size_t kReadChunk = size_t{16} * 1024;

// Rounded up, so that a wait never ends before the deadline.
int RemainingMs(SteadyTime deadline) {
  const auto left = std::chrono::ceil<Millis>(deadline - SteadyClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Plain TCP, driven directly so that an early answer is seen while the request is being written.
class PlainConnection final : public HttpDeliverer::Connection {
 public:
  explicit PlainConnection(redis::UniqueFd fd) : fd_(std::move(fd)) {}

  Status Write(std::string_view data, SteadyTime deadline) override {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        return Status(StatusCode::kIo, std::string("send failed: ") + std::strerror(errno));
      }
      const int wait_ms = RemainingMs(deadline);
      if (wait_ms == 0) return Status(StatusCode::kTimeout, "request not sent in time");
      pollfd pfd{fd_.get(), POLLIN | POLLOUT, 0};
      const int rc = ::poll(&pfd, 1, wait_ms);
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) return Status(StatusCode::kIo, std::string("poll: ") + std::strerror(errno));
      if (rc == 0) return Status(StatusCode::kTimeout, "request not sent in time");
      if ((pfd.revents & POLLIN) != 0) {
        if (CheckIdle() != Idle::kClean) {
          return Status(StatusCode::kProtocol,
                        "the handler answered (or closed) before the request was fully sent");
        }
      }
    }
    return Status::Ok();
  }

  StatusOr<size_t> Read(char* buffer, size_t size, SteadyTime deadline) override {
    while (true) {
      const ssize_t n = ::recv(fd_.get(), buffer, size, 0);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return Status(StatusCode::kIo, std::string("connection lost: ") + std::strerror(errno));
      }
      const int wait_ms = RemainingMs(deadline);
      if (wait_ms == 0) return Status(StatusCode::kTimeout, "no answer in time");
      pollfd pfd{fd_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, wait_ms) < 0 && errno != EINTR) {
        return Status(StatusCode::kIo, std::string("poll: ") + std::strerror(errno));
      }
    }
  }

  Idle CheckIdle() override {
    char byte;
    const ssize_t n = ::recv(fd_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return Idle::kUnread;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Idle::kClean;
    return Idle::kClosed;  // the peer's EOF, or an error
  }

 private:
  redis::UniqueFd fd_;
};

// TLS over the same verified OpenSSL transport the Redis client uses (redis/tls_transport.h).
// An early answer cannot be told apart from a late one here: it is read as the answer only if it
// is the first thing on a connection that was clean when the request was sent.
class TlsConnection final : public HttpDeliverer::Connection {
 public:
  explicit TlsConnection(std::unique_ptr<redis::Transport> transport)
      : transport_(std::move(transport)) {}

  Status Write(std::string_view data, SteadyTime deadline) override {
    return transport_->WriteAll(data, deadline);
  }

  StatusOr<size_t> Read(char* buffer, size_t size, SteadyTime deadline) override {
    auto n = transport_->ReadSome(buffer, size, deadline);
    // The transport reports a closed TLS connection as kIo; the parser decides whether an answer
    // that runs to the end of the connection was complete.
    if (!n.ok() && n.status().code() == StatusCode::kIo) return size_t{0};
    return n;
  }

  Idle CheckIdle() override {
    // A read that must not wait: TLS 1.3 session tickets are consumed without surfacing; any
    // application byte, the end of the connection or an error makes the connection unusable.
    char byte;
    auto n = transport_->ReadSome(&byte, 1, SteadyClock::now());
    if (n.ok()) return Idle::kUnread;
    return n.status().code() == StatusCode::kTimeout ? Idle::kClean : Idle::kClosed;
  }

 private:
  std::unique_ptr<redis::Transport> transport_;
};

void Replace(std::string* text, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (size_t at = text->find(from); at != std::string::npos; at = text->find(from, at)) {
    text->replace(at, from.size(), to);
    at += to.size();
  }
}

}  // namespace

HttpDeliverer::HttpDeliverer(const std::string& url, Millis timeout)
    : target_(SplitUrl(url)), timeout_(timeout) {
  in_.resize(kReadChunk);
}

HttpDeliverer::~HttpDeliverer() = default;

HandlerResponse HttpDeliverer::Post(const HttpRequest& request) {
  return Exchange("POST", &request);
}

bool HttpDeliverer::Get() {
  const HandlerResponse response = Exchange("GET", nullptr);
  return response.kind == HandlerResponse::Kind::kAnswered && response.status >= 200 &&
         response.status < 300;
}

HandlerResponse HttpDeliverer::Fail(HandlerResponse::Kind kind, std::string error) {
  connection_.reset();
  HandlerResponse response;
  response.kind = kind;
  response.error = std::move(error);
  return response;
}

HandlerResponse HttpDeliverer::Exchange(std::string_view method, const HttpRequest* request) {
  const SteadyTime started = SteadyClock::now();
  const SteadyTime deadline = started + timeout_;
  static const std::string user_agent = std::string("streamcar/") + kVersion;
  http1::RequestHead head;
  head.method = method;
  head.target = target_.path;
  head.authority = target_.authority;
  head.user_agent = user_agent;
  if (request != nullptr) {
    head.content_type = request->content_type;
    head.headers = &request->headers;
    head.has_body = true;
  }
  out_.clear();
  if (Status s = http1::SerializeRequest(
          head, request != nullptr ? std::string_view(request->body) : std::string_view(), &out_);
      !s.ok()) {
    // Nothing was sent: the request itself would have broken the framing.
    LogError("refused to send a request that would break HTTP framing",
             {{"url", target_.origin}, {"error", s.message()}});
    return Fail(HandlerResponse::Kind::kError, "request not sent: " + s.message());
  }

  if (connection_ != nullptr) {
    // Bytes on a connection with no request outstanding: an unsolicited answer is never taken
    // for the next request's. The end of the connection is an idle timeout on the handler's side.
    const Idle idle = connection_->CheckIdle();
    if (idle == Idle::kUnread) {
      LogWarn("handler sent bytes while no request was outstanding; connection closed",
              {{"url", target_.origin}});
    }
    if (idle != Idle::kClean) connection_.reset();
  }
  if (connection_ == nullptr) {
    const SteadyTime connect_deadline = std::min(deadline, started + kMaxConnect);
    config::RedisEndpoint endpoint;
    endpoint.kind = config::RedisEndpoint::Kind::kTcp;
    endpoint.host = target_.host;
    endpoint.port = target_.port;
    auto fd = redis::ConnectEndpoint(endpoint, connect_deadline);
    std::string why;
    if (fd.ok() && !target_.tls) {
      connection_ = std::make_unique<PlainConnection>(std::move(*fd));
    } else if (fd.ok()) {
      // Verified against the system trust store (SSL_CERT_FILE / SSL_CERT_DIR are honoured), the
      // name checked, SNI sent.
      endpoint.kind = config::RedisEndpoint::Kind::kTls;
      auto tls = redis::StartTls(std::move(*fd), endpoint, config::TlsConfig{}, connect_deadline);
      if (tls.ok()) {
        connection_ = std::make_unique<TlsConnection>(std::move(*tls));
      } else {
        why = tls.status().message();
        Replace(&why, endpoint.Describe(), target_.origin);
        Replace(&why, " (check redis.tls.ca_file and redis.tls.server_name)", "");
      }
    } else {
      why = fd.status().message();
    }
    if (connection_ == nullptr) {
      endpoint.kind = config::RedisEndpoint::Kind::kTcp;
      Replace(&why, endpoint.Describe(), target_.origin);
      return Fail(HandlerResponse::Kind::kRefused, why);
    }
    ++connections_opened_;
  }

  if (Status s = connection_->Write(out_, deadline); !s.ok()) {
    if (s.code() == StatusCode::kTimeout) {
      return Fail(HandlerResponse::Kind::kTimeout,
                  "no answer within " + std::to_string(timeout_.count()) + "ms");
    }
    if (s.code() == StatusCode::kProtocol) {
      LogWarn("handler answered before the request was fully sent; connection closed",
              {{"url", target_.origin}});
    }
    return Fail(HandlerResponse::Kind::kError, s.message());
  }

  parser_.Reset();
  while (!parser_.complete()) {
    auto n = connection_->Read(in_.data(), in_.size(), deadline);
    if (!n.ok()) {
      if (n.status().code() == StatusCode::kTimeout) {
        return Fail(HandlerResponse::Kind::kTimeout,
                    "no answer within " + std::to_string(timeout_.count()) + "ms");
      }
      return Fail(HandlerResponse::Kind::kError, n.status().message());
    }
    if (*n == 0) {
      parser_.FeedEof();
      if (parser_.failed()) return Fail(HandlerResponse::Kind::kError, parser_.error());
      break;
    }
    const size_t used = parser_.Feed(std::string_view(in_.data(), *n));
    if (parser_.failed()) {
      LogWarn("malformed answer from the handler; connection closed",
              {{"url", target_.origin}, {"error", parser_.error()}});
      return Fail(HandlerResponse::Kind::kError, "malformed answer: " + parser_.error());
    }
    if (parser_.complete() && used < *n) {
      LogWarn("handler sent bytes after its answer; connection closed, the request will be retried",
              {{"url", target_.origin}, {"extra_bytes", static_cast<int64_t>(*n - used)}});
      return Fail(HandlerResponse::Kind::kError,
                  "the handler sent " + std::to_string(*n - used) + " bytes after its answer");
    }
  }

  http1::Response& answer = parser_.response();
  if (!answer.keep_alive) connection_.reset();
  HandlerResponse response;
  response.kind = HandlerResponse::Kind::kAnswered;
  response.status = answer.status;
  if (const std::string* retry_after = answer.Find("Retry-After")) {
    response.retry_after = *retry_after;
  }
  response.body = std::move(answer.body);
  return response;
}

}  // namespace streamcar::delivery
