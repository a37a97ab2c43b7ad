#pragma once
// What a Redis reply means for routing: a value, a plain error, or one of the errors a cluster or
// a failover produces (redirects, transient states, a node that changed role). Every driver
// classifies through here, so a prefix is spelled once.

#include <string_view>

#include "sidecar/keys/node_address.h"
#include "sidecar/redis/reply.h"

namespace streamcar::redis {

enum class ReplyKind {
  kValue,        // not an error reply (nil and arrays included)
  kError,        // any other error: the command's own answer (WRONGTYPE, NOGROUP, BUSYGROUP...)
  kMoved,        // -MOVED <slot> <endpoint>:<port>: the slot lives elsewhere now
  kAsk,          // -ASK <slot> <endpoint>:<port>: this one command, there, after ASKING
  kTryAgain,     // -TRYAGAIN: a multi-key command during the slot's migration
  kClusterDown,  // -CLUSTERDOWN: the cluster (or this slot) is not served right now
  kLoading,      // -LOADING: the node is loading its data set
  kMasterDown,   // -MASTERDOWN: a replica lost its master (replica-serve-stale-data no)
  kReadOnly,     // -READONLY: a write reached a replica (a demoted master, sentinel mode)
  kUnblocked,    // -UNBLOCKED: a blocked command was released (role change, key deleted)
  kNoScript,     // -NOSCRIPT: this node's script cache lacks the script (a new master)
  kCrossSlot,    // -CROSSSLOT: the keys of one command are in different slots
};

// For logs and metric labels: "value", "error", "moved", "ask", "tryagain", ...
std::string_view ReplyKindName(ReplyKind kind);

// Where a -MOVED or -ASK sends the command. `to.host` may be "" (the node's endpoint is unknown:
// use the host the command went to) or "?" (no usable host: refresh the map).
struct Redirect {
  int slot = -1;
  keys::NodeAddress to;
};

// The kind of `reply`. For kMoved and kAsk, `*redirect` (when not null) is filled; a -MOVED or
// -ASK whose slot or endpoint does not parse is kError (nothing to follow).
ReplyKind Classify(const ReplyView& reply, Redirect* redirect);

// A -UNBLOCKED because the stream key was deleted ("the stream key no longer exists"): in a
// cluster, MIGRATE deletes the key on the source, so this is a migration, not a deletion.
bool IsUnblockedByKeyDeletion(const ReplyView& reply);

}  // namespace streamcar::redis
