#pragma once
// The HTTP/1.1 handler client on an EventLoop: a keep-alive connection pool with up to
// `concurrency` requests in flight, each on its own connection, framed by http1_codec. Nothing
// here blocks the loop: a host name is resolved on a transient thread (resolve.h) at the first
// connection and again after a refusal, the requests that need a connection meanwhile waiting
// for it within the connect cap below; a literal address is resolved at once, without I/O.
//
// Strict matching (SPEC 3.1), the rules of the blocking client kept one for one: an answer is
// only ever taken for the request just sent on that connection. Bytes or the end of the
// connection while it is idle close it (bytes are logged); an answer (or a close) before the
// request was fully written is kError; bytes after a complete answer are kError and close it; a
// malformed answer is kError and closes it; `Connection: close` (or HTTP/1.0 without keep-alive)
// closes it after the answer.
//
// Time: one timer per request covers connecting, writing and reading (`timeout` of Send/Probe,
// counted from the call); a handler that trickles its answer is cut off at the deadline
// (kTimeout). Resolving and connecting together are also capped at 2 s: a handler in the same pod
// that does not accept quickly is not listening, so a connection not established in time is
// kRefused (not an attempt), as is a refused one. A timeout closes only its own connection.
//
// Transport: plain TCP with TCP_NODELAY (DESIGN.md trap 7), a Unix socket when the target names
// one (HttpTarget::unix_socket, SPEC 11: connected at once, nothing to resolve), or for https://
// TLS (1.2 at least) verified against the system trust store (SSL_CERT_FILE / SSL_CERT_DIR are
// honoured), the name checked, SNI sent; the handshake runs on the loop within the 2 s connect cap
// (a failed or untrusted handshake is kRefused). A TLS 1.3 session ticket arriving on an idle
// connection is consumed, not taken for unsolicited bytes.
//
// Threads: loop thread only (see handler_client.h).

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/common/event_loop.h"
#include "sidecar/common/status.h"
#include "sidecar/delivery/handler_client.h"
#include "sidecar/delivery/http1_codec.h"
#include "sidecar/delivery/http_target.h"
#include "sidecar/delivery/request_auth.h"
#include "sidecar/delivery/resolve.h"

namespace streamcar::delivery {

class Http1Client final : public HandlerClient {
 public:
  // `health` is probed by Probe (the handler target when absent). kInvalid for concurrency 0, or
  // when the trust store for an https:// target cannot be loaded.
  // `resolver` resolves host names off the loop (tests pass a slow or failing one).
  static StatusOr<std::unique_ptr<Http1Client>> Create(EventLoop& loop, HttpTarget handler,
                                                       std::optional<HttpTarget> health,
                                                       size_t concurrency,
                                                       Resolver resolver = ResolveHost);
  ~Http1Client() override;  // closes everything; pending callbacks never run
  Http1Client(const Http1Client&) = delete;
  Http1Client& operator=(const Http1Client&) = delete;

  // One more handler target (SPEC 11 routes: a route's url), the next index of
  // HttpRequest::target (the first, 0, is Create's `handler`). Its connections share the
  // concurrency with every other target's. kInvalid when an https:// target's trust store cannot
  // be loaded. Call before the first Send.
  Status AddTarget(HttpTarget target);

  // handler.auth (SPEC 11): every request from now on, deliveries and health probes alike,
  // carries what `auth` adds (request_auth.h). Call before the first Send.
  void SetAuth(std::unique_ptr<RequestAuth> auth) { auth_ = std::move(auth); }

  bool Send(HttpRequest&& request, Millis timeout, Done done) override;
  void Probe(Millis timeout, std::function<void(bool healthy)> done) override;
  size_t free_slots() const override;
  void Abandon() override;

  // Connections established so far, handler and health together (for tests and debugging).
  int connections_opened() const { return connections_opened_; }

 private:
  struct Connection;
  struct Pool;
  struct ResolverLink;

  Http1Client(EventLoop& loop, HttpTarget handler, std::optional<HttpTarget> health,
              size_t concurrency, Resolver resolver);

  // The trust store of an https:// pool (nothing for http://).
  static Status LoadTrust(Pool& pool);
  // Requests outstanding over every handler target.
  size_t busy() const;

  // Sends `out` (a serialized request) on an idle connection of `pool`, or a new one.
  void Start(Pool& pool, std::string out, Millis timeout, Done done);
  // An idle connection whose socket is still clean, most recently used first; closes the others.
  Connection* TakeIdle(Pool& pool);
  // Opens a connection to the next address of `pool` from `connection->next_address` on; false
  // (and *why set) when no address is left.
  bool ConnectNext(Connection* connection, std::string* why);
  // Resolves `pool`'s host on a transient thread; OnResolved runs on the loop.
  void StartResolving(Pool& pool);
  void OnResolved(Pool& pool, StatusOr<std::vector<ResolvedAddress>> addresses);
  // A connection whose addresses are known: connects it, or fails its request (kRefused).
  void ConnectResolved(Connection* connection);

  void OnEvent(Connection* connection, uint32_t ready);
  void OnConnectEvent(Connection* connection);
  void StartTls(Connection* connection);
  void Handshake(Connection* connection);
  void OnIdleEvent(Connection* connection);
  void OnTimer(Connection* connection);
  // Writes what is pending; false when the request failed (already finished, or posted when
  // `inside_send`: Send and Probe never run a callback themselves).
  bool WriteSome(Connection* connection, bool inside_send = false);
  // `ready`: the round's readiness of the connection (kPeerClosed: not kept after the answer).
  void ReadAnswer(Connection* connection, uint32_t ready);

  // Ends the request on `connection`: keeps the connection (idle) or closes it, frees the slot,
  // then runs `done` (last: it may Send again).
  void Finish(Connection* connection, HandlerResponse response, bool keep);
  void Fail(Connection* connection, HandlerResponse::Kind kind, std::string error);
  void Close(Connection* connection);
  // Runs `done(response)` from the loop soon (for a failure found inside Send/Probe).
  void Defer(Done done, HandlerResponse response);

  EventLoop& loop_;
  Resolver resolver_;
  // Shared with the resolving threads: they post to the loop only while the client lives.
  std::shared_ptr<ResolverLink> link_;
  // The handler targets, HttpRequest::target's indices: [0] the handler URL, then AddTarget's.
  std::vector<std::unique_ptr<Pool>> handlers_;
  std::unique_ptr<Pool> health_;
  std::unique_ptr<RequestAuth> auth_;                     // null: requests carry no credentials
  std::vector<std::function<void(bool)>> probe_waiters_;  // Probes sharing the one in flight
  int connections_opened_ = 0;
  std::string in_;  // one read buffer for every connection (one thread)
  // Deferred callbacks run only while the client lives and has not been abandoned since.
  std::shared_ptr<uint64_t> epoch_;
};

}  // namespace streamcar::delivery
