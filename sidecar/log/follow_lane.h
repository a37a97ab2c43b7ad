#pragma once
// The follow hub's connections (follow_hub.cc): a lane is one blocking read and its thread, for
// every followed stream of one cluster slot (or every followed stream without a cluster). Each of
// its connections, and each catch-up connection, talks to the node the topology names for its
// slot, and moves when that node no longer serves it.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "sidecar/common/status.h"
#include "sidecar/keys/node_address.h"
#include "sidecar/redis/session.h"
#include "sidecar/redis/topology/reply_kind.h"
#include "sidecar/redis/topology/topology.h"

namespace streamcar::log {

// One blocking read and its thread. The fields are guarded by the hub's mutex, except `thread`
// (started once, joined by Stop) and `client_id` (read by the waker without the lock).
struct Lane {
  int slot = -1;                // the slot its streams share; -1 without a cluster
  uint64_t wanted_version = 0;  // bumped when a stream joins this lane
  uint64_t issued_version = 0;  // the wanted version its last issued XREAD includes
  bool done = false;            // its thread has ended (the hub stops)
  Status error;                 // why its last read failed; Ok after a read
  // Where its blocking connection is, and that connection's CLIENT ID (0: none yet).
  std::optional<keys::NodeAddress> node;
  std::atomic<int64_t> client_id{0};
  std::thread thread;
};

// A lane's (or a catch-up read's) connection: a plain session to one node (never routed: CLIENT
// ID and the XREAD must reach the same connection, and the waker must find it), replaced when its
// node no longer serves the slot.
struct LaneConnection {
  std::unique_ptr<redis::Session> session;
  std::optional<keys::NodeAddress> node;  // with a topology: the node `session` talks to
  uint64_t topology_version = 0;          // the topology's version when `node` was checked
  uint64_t id_generation = 0;             // the session generation its CLIENT ID was read on
  int failures = 0;                       // connects failed in a row (the backoff's step)
};

// An error reply that says where the lane's slot is (or is not) served, rather than answering
// the read: the lane must go elsewhere or wait, not blame a key.
enum class LaneErrorKind { kNone, kMoved, kWait, kNodeFailed };

// Which kind `status` is; a MOVED fills *redirect.
LaneErrorKind LaneErrorKindOf(const Status& status, redis::Redirect* redirect);

// Points the hub's connections at the node serving their slot. Without a topology every
// connection goes to the url, as always.
class SlotSessions {
 public:
  explicit SlotSessions(redis::ConnectionOptions options);

  redis::Topology* topology() const { return topology_; }
  const redis::ConnectionOptions& options() const { return options_; }
  redis::RedisHealth& health() { return health_; }

  // A session (named `role`) in *connection to the node now serving `slot`.
  Status Target(int slot, LaneConnection& connection, const std::string& role);
  // The connection's node failed it (or said the slot is elsewhere): the topology hears of it,
  // and the next command goes where the topology then says.
  void Retarget(LaneConnection& connection, std::string_view why);
  // A command on `connection` failed: when it says the slot is served elsewhere (or the node is
  // gone), the topology hears of it and the connection is replaced. True when it was replaced
  // (sending again may succeed).
  bool AfterFailure(LaneConnection& connection, const Status& status);

 private:
  redis::ConnectionOptions options_;
  redis::Topology* topology_ = nullptr;  // borrowed from options_; null: standalone
  redis::RedisHealth health_;
};

}  // namespace streamcar::log
