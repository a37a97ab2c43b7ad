#pragma once
// One connection to Redis: connect, AUTH, SELECT, then commands and pipelines with deadlines.
// Not thread-safe: exactly one owning thread. After an I/O error or a timeout the connection is
// broken (the reply stream is out of step) and must be replaced; see Session.

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/config/redis_url.h"
#include "sidecar/keys/node_address.h"
#include "sidecar/redis/reply.h"
#include "sidecar/redis/transport.h"

namespace streamcar::redis {

class Topology;  // redis/topology/topology.h

struct ConnectionOptions {
  config::RedisEndpoint endpoint;
  std::string username;  // AUTH user (ACL); empty: default user
  std::string password;  // empty: no AUTH
  Millis connect_timeout{2000};
  Millis command_timeout{5000};
  std::string client_name;  // CLIENT SETNAME, so operators can see us in CLIENT LIST
  config::TlsConfig tls;    // used when endpoint.kind is kTls
  // Set in cluster and sentinel modes (and auto): the endpoint above is then only a seed, and
  // Open connects to topology->MasterFor(slot) instead (no SELECT in a cluster; ROLE must say
  // master under Sentinel). Empty: the endpoint, as always.
  std::shared_ptr<Topology> topology;
  int slot = -1;  // the key slot this connection serves (keys/key_slot.h); -1: any
};

// The options of a validated configuration: the URL's endpoint, with redis.username/password
// taking precedence over credentials in the URL.
ConnectionOptions ConnectionOptionsOf(const config::Config& config);

class Connection {
 public:
  // Connects and authenticates. A refused password or a server that requires one is kFatal.
  // With a topology: to the master of `options.slot`, told of a node that fails us.
  static StatusOr<std::unique_ptr<Connection>> Open(const ConnectionOptions& options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one command within the command timeout; an error reply becomes kServerError carrying
  // the server's message ("WRONGTYPE Operation against a key...").
  StatusOr<Reply> Run(const Command& command);
  // Runs a command that may block server-side for up to `server_block` (XREADGROUP BLOCK): the
  // socket deadline is set above it (DESIGN.md trap 5).
  StatusOr<Reply> RunBlocking(const Command& command, Millis server_block);
  // Sends all commands in one write and reads all replies. Error replies stay replies (inside a
  // MULTI/EXEC they are expected); only I/O problems fail the whole call.
  StatusOr<std::vector<Reply>> RunPipeline(const std::vector<Command>& commands);

  bool broken() const { return broken_; }
  // The server ended the connection while it sat unused (a restart, its idle `timeout`, CLIENT
  // KILL): a non-blocking look at the socket (and, with TLS, at a record waiting: close_notify)
  // that consumes no reply bytes.
  bool ClosedByPeer() const;
  // The node the topology chose; nullopt for a connection opened without one.
  const std::optional<keys::NodeAddress>& node() const { return node_; }

  // Hands the live transport over (to an AsyncConnection, see connector.h), leaving this
  // connection unusable. kProtocol when Redis sent bytes nobody asked for: they would put the
  // new owner's reply stream out of step.
  StatusOr<std::unique_ptr<Transport>> TakeTransport() &&;

 private:
  Connection(std::unique_ptr<Transport> transport, Millis command_timeout);
  static StatusOr<std::unique_ptr<Connection>> OpenAt(const ConnectionOptions& options);
  StatusOr<Reply> ReadReply(SteadyTime deadline);
  StatusOr<Reply> RunUntil(const Command& command, SteadyTime deadline);
  Status Fail(Status status);

  std::unique_ptr<Transport> transport_;
  ReaderPtr reader_;
  Millis command_timeout_;
  bool broken_ = false;
  std::string write_buffer_;
  std::optional<keys::NodeAddress> node_;
};

// kServerError with the reply's text when `reply` is an error reply.
Status ErrorOf(const ReplyView& reply);

// The CLIENT SETNAME of a connection of `streamcar run`: "streamcar:<consumer>", then each part
// after a ':' (a subscription, its role: "streamcar:pod-1:orders/g:read"), so that an operator's
// CLIENT LIST groups a process's connections by prefix. Spelled here only.
std::string ClientName(std::string_view consumer,
                       std::initializer_list<std::string_view> parts = {});

}  // namespace streamcar::redis
