#pragma once
// The inbound HTTP/1.1 server of the admin port and the log API, on one thread's event loop
// (common/event_loop.h): it accepts, reads and writes without blocking, so no client can hold it.
//
// Per connection: requests one after another (keep-alive, and pipelining: a request that arrived
// behind another is answered after it, in order), each parsed strictly (http/request.h). Bounds:
//   - a head at most max_head_bytes (431), a body at most max_body (413, from the head when
//     Content-Length says so);
//   - a request must arrive whole within request_timeout of its first byte (408 and close); slow
//     senders do not extend it;
//   - a new connection must send its first byte within head_timeout; a keep-alive connection may
//     idle idle_timeout between requests, or unauthenticated_idle_timeout when the service did not
//     vouch for its last request (Service::Screening); all are closed silently;
//   - an answer or a stream's bytes must keep being taken: write_timeout without progress closes;
//   - at most max_connections: a new one beyond it evicts an idle connection, an unauthenticated
//     one first, then one still sending its request, the longest quiet first; connections waiting
//     for their answer or streaming are never evicted, and when only those remain the new one is
//     answered 503 and closed.
// After an answer that closes the connection, the input is drained for up to linger_timeout, so
// the answer is not destroyed by a reset.
//
// Threads: construct, Listen, and destroy on the loop's thread (or before the loop runs); the
// service runs on it. Time comes from the loop's clock, so tests drive deadlines by hand.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "sidecar/common/clock.h"
#include "sidecar/common/event_loop.h"
#include "sidecar/common/status.h"
#include "sidecar/http/service.h"

namespace streamcar::http {

// How a Responder reaches its server from any thread (server.cc).
struct ServerLink;

struct ServerOptions {
  std::string name = "http server";  // in log lines
  size_t max_head_bytes = size_t{16} * 1024;
  uint64_t max_body = uint64_t{1} << 20;
  size_t max_connections = 256;
  Millis head_timeout{10000};
  Millis unauthenticated_idle_timeout{10000};
  Millis request_timeout{10000};
  Millis idle_timeout{60000};
  Millis write_timeout{10000};
  Millis linger_timeout{1000};
};

class Server {
 public:
  Server(EventLoop* loop, ServerOptions options, Service* service);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds `listen` ("host:port", "[::]:port", ":port"; port 0 picks a free one) and accepts from
  // now on; kFatal naming `setting` when the address cannot be bound.
  Status Listen(const std::string& listen, const std::string& setting);
  int port() const { return port_; }
  // Whether the bound address is reachable from this host only (common/listen_socket.h).
  bool bound_to_loopback() const { return loopback_; }
  size_t connections() const { return live_; }

 private:
  struct Connection;

  void Accept();
  void Admit(int fd);
  bool MakeRoom();
  void OnReady(Connection* c, uint32_t ready);
  void ReadAvailable(Connection* c);
  void DrainStreaming(Connection* c);
  void Advance(Connection* c);
  bool AdvanceHead(Connection* c);
  bool AdvanceBody(Connection* c);
  void Dispatch(Connection* c);
  void Refuse(Connection* c, int status, std::string_view message);
  void Queue(Connection* c, std::string_view bytes, bool close_after);
  void Flush(Connection* c);
  void AfterWritten(Connection* c);
  void Linger(Connection* c);
  void OnDeadline(Connection* c);
  void Rearm(Connection* c);
  void Close(Connection* c);
  friend class Responder;
  // What a Responder posted, on the loop.
  void Deliver(uint64_t connection_id, uint64_t exchange, Response response);
  void DeliverStreamHead(uint64_t connection_id, uint64_t exchange, const Response& head);
  void DeliverStreamBytes(uint64_t connection_id, uint64_t exchange, const std::string& bytes);
  void DeliverStreamEnd(uint64_t connection_id, uint64_t exchange);
  Connection* Find(uint64_t connection_id, uint64_t exchange);

  EventLoop* loop_;
  ServerOptions options_;
  Service* service_;
  std::shared_ptr<ServerLink> link_;
  int listen_fd_ = -1;
  int port_ = 0;
  bool loopback_ = false;
  std::unique_ptr<EventLoop::FdWatch> listen_watch_;
  uint64_t next_id_ = 1;
  size_t live_ = 0;  // connections not closed yet (a closed one is freed on the next turn)
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
};

}  // namespace streamcar::http
