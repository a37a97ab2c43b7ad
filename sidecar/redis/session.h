#pragma once
// A connection that comes back: reconnects with capped exponential backoff and jitter, reports
// up/down to a shared RedisHealth, and turns an authentication refusal into kFatal. One owning
// thread per Session, like the Connection inside it.
//
// Routed (cluster, sentinel; given NodeRoutes): one connection per node, opened on demand. Each
// command goes to the master of its first key's slot (command_keys.h; keyless commands and every
// command under Sentinel: MasterFor(-1)) and follows the servers' answers (SPEC 8): -MOVED
// (learned, sent again there), -ASK (ASKING and the command once to the named node), -TRYAGAIN,
// -CLUSTERDOWN, -LOADING, -MASTERDOWN (capped backoff until the command timeout, then that error
// reply is the answer), -READONLY (the node is reported failed, sent to the slot's master again),
// -NOSCRIPT for a script this session loaded (loaded on that node, sent again). A pipeline is
// split per node and its replies put back in order. A lost connection reports the node failed
// and returns the same Status as unrouted (the caller decides what an unanswered write means).

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/common/backoff.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/keys/node_address.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/topology/node_routes.h"

namespace streamcar::redis {

// Shared by all sessions of the process: Redis is "up" while no session is disconnected.
class RedisHealth {
 public:
  bool up() const { return down_sessions_.load() == 0 && ever_connected_.load(); }
  void MarkDown() { down_sessions_.fetch_add(1); }
  void MarkUp() {
    down_sessions_.fetch_sub(1);
    ever_connected_ = true;
  }

 private:
  std::atomic<int> down_sessions_{0};
  std::atomic<bool> ever_connected_{false};
};

class Session {
 public:
  // Routed when options.topology is set (by that topology), else to options.endpoint.
  Session(ConnectionOptions options, std::string role, RedisHealth* health);
  // Routed by `routes` (cluster, sentinel): `options` gives the client name only; each node's
  // connection options come from routes->OptionsFor.
  Session(ConnectionOptions options, std::string role, RedisHealth* health,
          std::shared_ptr<NodeRoutes> routes);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Returns once connected; retries with backoff meanwhile. kFatal when Redis refuses our
  // credentials (retrying cannot fix it), kCancelled when `stop` was requested.
  Status EnsureConnected(StopSignal& stop);
  // One connection attempt (no waiting); Ok when already connected. For loops that must keep
  // serving other work between attempts. Returns the delay to wait before the next attempt in
  // *retry_in on failure. A connection the server closed while it sat unused (a pooled session
  // after a Redis restart) is replaced here, before a command is sent on it and fails.
  Status ConnectOnce(Millis* retry_in);

  // Like Connection's, but never on a broken connection: I/O failures drop it, and the next call
  // after EnsureConnected uses a fresh one.
  StatusOr<Reply> Run(const Command& command);
  StatusOr<Reply> RunBlocking(const Command& command, Millis server_block);
  StatusOr<std::vector<Reply>> RunPipeline(const std::vector<Command>& commands);

  // Routed: at least one node connection is open (commands open the others on demand).
  bool connected() const { return routes_ ? !nodes_.empty() : connection_ != nullptr; }
  // Counts the connections made: per-connection state (loaded scripts) is stale when it moves.
  uint64_t generation() const { return generation_; }
  const std::string& role() const { return role_; }
  // Counts the connections lost to an I/O failure or a timeout (a command's answer unknown).
  uint64_t lost_connections() const { return lost_connections_; }

 private:
  template <typename T>
  StatusOr<T> Track(StatusOr<T> result);
  void Drop();
  void MarkUp();

  // --- routed (routes_ set): session_routing.cc ---
  Status RoutedConnectOnce(Millis* retry_in);
  // The slot `command` is routed by: its first key's under cluster, else -1.
  int RouteSlotOf(const Command& command) const;
  // The node's connection, opened when missing. kFatal when the node refuses our credentials.
  StatusOr<Connection*> ConnectionTo(const keys::NodeAddress& node);
  void DropNode(const keys::NodeAddress& node, std::string_view why);
  // Closes the node's connection with nothing lost (no command in flight): DropNode's bookkeeping
  // without counting a lost answer or reporting the node.
  void ForgetNode(const keys::NodeAddress& node);
  // One send of `command` to `node` (ASKING first when `asking`). Error replies come back as
  // replies; a Status is an I/O failure (*sent: the command may have reached the node).
  StatusOr<Reply> SendTo(const keys::NodeAddress& node, const Command& command, Millis server_block,
                         bool asking, bool* sent);
  // Sends `command` for `slot` starting at `target` until it has an answer (error replies are
  // answers), following redirects; `first`, when given, is the reply `target` already sent.
  StatusOr<Reply> Follow(const Command& command, int slot, Millis server_block,
                         keys::NodeAddress target, std::optional<Reply> first);
  StatusOr<Reply> RoutedRun(const Command& command, Millis server_block);
  StatusOr<std::vector<Reply>> RoutedPipeline(const std::vector<Command>& commands);
  // RoutedPipeline's steps: each command's slot, one group per node, each group sent as one
  // sub-pipeline, then each command that needs it carried through the redirects on its own.
  struct RoutedBatch;
  void PlanSlots(RoutedBatch* batch) const;
  Status GroupByNode(RoutedBatch* batch);
  Status SendGroups(RoutedBatch* batch);
  Status FollowUnsettled(RoutedBatch* batch);
  // SCRIPT LOAD bodies by SHA, to load a script again on a node that answers NOSCRIPT.
  void RememberScript(const Command& command, const ReplyView& reply);
  std::optional<std::string> ScriptBodyFor(const Command& command) const;

  ConnectionOptions options_;
  std::string role_;
  RedisHealth* health_;
  std::unique_ptr<Connection> connection_;
  bool counted_down_ = false;
  RetryStreak reconnect_;  // the one reconnect backoff (common/backoff.h)
  uint64_t generation_ = 0;
  uint64_t lost_connections_ = 0;

  std::shared_ptr<NodeRoutes> routes_;
  std::map<keys::NodeAddress, std::unique_ptr<Connection>> nodes_;
  std::map<std::string, std::string, std::less<>> scripts_;
};

}  // namespace streamcar::redis
