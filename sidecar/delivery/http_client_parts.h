#pragma once
// The inside of Http1Client (http_client.h), shared by its two sources: http_client.cc (requests,
// answers and the pool) and http_client_connect.cc (resolving, connecting, the TLS handshake).
// Only those two include it.

#include <openssl/ssl.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/event_loop.h"
#include "sidecar/common/unique_fd.h"
#include "sidecar/delivery/http1_codec.h"
#include "sidecar/delivery/http_client.h"
#include "sidecar/delivery/http_socket.h"

namespace streamcar::delivery {

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

}  // namespace streamcar::delivery
