#pragma once
// One Redis connection driven by an event loop: commands are pipelined, replies are matched to
// their callbacks in FIFO order (Redis answers in order), read with hiredis's redisReader exactly
// as the blocking Connection does. Opening happens off the loop (connector.h).
//
// A broken connection (I/O error, a reply that cannot be decoded, or the earliest outstanding
// command past its deadline: the reply stream is then out of step) fails every outstanding
// callback and reconnects with RetryStreak, logging one line per backoff step as Session
// does. A refusal that retrying cannot fix (authentication, an untrusted certificate) is reported
// to OnFatal and the connection stays down.
//
// Threads: loop thread only. Callbacks run on the loop, never inside the call that queued them.
// Destroying the connection drops the outstanding callbacks without running them.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/common/backoff.h"
#include "sidecar/common/event_loop.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/connector.h"
#include "sidecar/redis/reply.h"
#include "sidecar/redis/script.h"
#include "sidecar/redis/session.h"

namespace streamcar::redis {

struct BatchResult {
  std::vector<Reply> replies;  // in order; on failure only the prefix that arrived
  Status failure;              // ok, or kTimeout/kIo/kProtocol/kCancelled: no full answer
  bool written = true;         // false: nothing of the batch reached the socket
};

class AsyncConnection {
 public:
  // Starts connecting at once. `health` (may be null) counts this connection down until it is
  // connected, as Session does. `scripts` are loaded (SCRIPT LOAD) after each connect, before
  // OnReady runs.
  AsyncConnection(EventLoop& loop, Connector& connector, ConnectionOptions options,
                  std::string role, RedisHealth* health, std::span<const Script* const> scripts);
  ~AsyncConnection();
  AsyncConnection(const AsyncConnection&) = delete;
  AsyncConnection& operator=(const AsyncConnection&) = delete;

  // Sends the commands in one write; `done` gets every reply (error replies stay replies) or
  // the failure with the prefix that arrived. While disconnected it fails at once (on the loop)
  // with kIo and written = false.
  void SendBatch(const std::vector<Command>& commands, Millis timeout,
                 std::function<void(BatchResult)> done);
  // One command within the command timeout; an error reply becomes kServerError.
  void Send(Command command, std::function<void(StatusOr<Reply>)> done);
  void Send(Command command, Millis timeout, std::function<void(StatusOr<Reply>)> done);
  // A command that may block server-side for up to `server_block` (XREADGROUP BLOCK): its
  // deadline is server_block + the command timeout (DESIGN.md trap 5).
  void SendBlocking(Command command, Millis server_block,
                    std::function<void(StatusOr<Reply>)> done);

  // After each (re)connect, once the scripts are loaded.
  void OnReady(std::function<void()> callback) { on_ready_ = std::move(callback); }
  // A refusal retrying cannot fix; the connection stays down.
  void OnFatal(std::function<void(const Status&)> callback) { on_fatal_ = std::move(callback); }

  // Not while it is about to follow its slot to another node (it refuses new commands then).
  bool ready() const { return state_ == State::kReady && !retarget_pending_; }
  bool connected() const { return state_ == State::kLoadingScripts || state_ == State::kReady; }
  // Counts the connections made: per-connection state (loaded scripts, the client id) is stale
  // when it moves.
  uint64_t generation() const { return generation_; }
  // CLIENT ID of the current connection, for CLIENT UNBLOCK from another connection.
  std::optional<int64_t> client_id() const { return client_id_; }
  // Following an -ASK: each command goes out behind an ASKING (a transaction would queue them).
  // Ends an -ASK followed for long enough first, as sending does (the connection then goes back
  // to the slot's master): a caller that waits instead of sending still gets out of it.
  bool FollowingAsk();
  // The node the current connection is to (an ASK target included); nullopt without a topology.
  // A client id means something only on its node.
  const std::optional<keys::NodeAddress>& node() const { return node_; }
  const std::string& role() const { return role_; }
  // The deadline Send gives one command; for SendBatch callers that want the same.
  Millis command_timeout() const { return options_.command_timeout; }
  // Replies still awaited (across batches).
  size_t outstanding() const;

  // Cluster: the live replicas the topology's map lists for the node this connection is on,
  // when that node is its slot's master there; nullopt without a topology, while the map does
  // not know them, while following an -ASK, or when the map names another master (the slot moved
  // under the connection: the count would be another node's).
  std::optional<int> KnownReplicas() const;
  // A reply said the node is no master any more (ROLE says "slave", WAIT is refused on a
  // replica): as after -READONLY, the topology is told and the connection follows its slot to the
  // new master (a connection already down asks the topology again as it reconnects). Without a
  // topology, nothing.
  void FollowDemotedMaster(std::string_view why);

  // Closes for good: outstanding callbacks fail with kCancelled, no reconnect.
  void Close();

 private:
  enum class State { kConnecting, kWaitingToRetry, kLoadingScripts, kReady, kFatal, kClosed };
  struct Batch {
    size_t expected = 0;  // replies awaited, the ASKING answers included
    size_t answered = 0;  // replies arrived, the ASKING answers included
    bool asking = false;  // each command follows an ASKING whose answer is not the caller's
    std::vector<Reply> replies;
    uint64_t stream_begin = 0;  // offset of its first byte in everything queued for writing
    std::multiset<SteadyTime>::iterator deadline;
    std::function<void(BatchResult)> done;
  };

  void Connect();
  void OnOpened(StatusOr<OpenedConnection> opened);
  void LoadScripts();
  void OnIo(uint32_t ready);
  // Writes what the socket takes now; the error when the connection broke.
  Status FlushOutput();
  // Reads and delivers what has arrived; breaks the connection on an error. A callback may
  // destroy `this` meanwhile: nothing after a call touches members unless the lifeline holds.
  void ReadInput();
  void DeliverReply(Reply reply);
  void UpdateInterest();
  void ArmDeadline();
  void Break(const Status& status, bool reconnect);
  void FailAll(std::deque<Batch> batches, const Status& status);
  void Queue(const std::vector<Command>& commands, Millis timeout,
             std::function<void(BatchResult)> done);
  void MarkDown();
  void MarkUp();
  // Cluster and Sentinel (options_.topology set): this connection serves options_.slot. A
  // topology change, -MOVED for that slot, -READONLY or -UNBLOCKED by a role change make it
  // refuse new commands (not written, a definite failure for the caller), wait for the replies
  // outstanding, and reconnect: Connect asks the topology for the slot's master again.
  void CheckTopology();
  void NoteTopologyError(const ReplyView& reply);
  void RequestRetarget(const std::string& to);
  void Retarget();

  EventLoop& loop_;
  Connector& connector_;
  ConnectionOptions options_;
  std::string role_;
  RedisHealth* health_;
  std::vector<const Script*> scripts_;

  State state_ = State::kConnecting;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<EventLoop::FdWatch> watch_;
  ReaderPtr reader_;
  std::deque<Batch> batches_;
  std::multiset<SteadyTime> deadlines_;
  std::string output_;  // queued bytes; those before output_sent_ are written
  size_t output_sent_ = 0;
  uint64_t stream_queued_ = 0;   // bytes ever queued on this connection
  uint64_t stream_written_ = 0;  // bytes ever written on this connection
  IoWait write_wait_ = IoWait::kWritable;
  IoWait read_wait_ = IoWait::kReadable;
  std::unique_ptr<EventLoop::Timer> deadline_timer_;
  std::unique_ptr<EventLoop::Timer> retry_timer_;
  std::unique_ptr<EventLoop::Timer> read_again_timer_;  // TLS bytes buffered past one round
  // A write that failed inside SendBatch: the break (which runs callbacks) waits for the loop.
  std::unique_ptr<EventLoop::Timer> failure_timer_;
  Status pending_failure_;
  // The one reconnect backoff (common/backoff.h); with a topology, capped sooner (the .cc says
  // why).
  RetryStreak reconnect_;
  bool counted_down_ = false;
  uint64_t generation_ = 0;
  std::optional<int64_t> client_id_;
  std::optional<keys::NodeAddress> node_;  // where the topology sent this connection
  // Set after a -ASK for this connection's slot: the slot is migrating and its key already went
  // to this node. The connection goes there and sends ASKING before every command, for a second
  // (then it asks the slot's owner again) or until the topology names the slot's new master.
  std::optional<keys::NodeAddress> ask_node_;
  keys::NodeAddress asked_from_;  // the slot's master when the -ASK came (the migration's source)
  SteadyTime ask_since_{};
  uint64_t topology_version_ = 0;
  bool retarget_pending_ = false;
  bool moving_ = false;  // the break under way is Retarget's planned move
  std::function<void()> on_ready_;
  std::function<void(const Status&)> on_fatal_;
  // Callbacks may destroy this connection: every path that runs one checks the lifeline after.
  std::shared_ptr<bool> lifeline_ = std::make_shared<bool>(true);
};

}  // namespace streamcar::redis
