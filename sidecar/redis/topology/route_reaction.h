#pragma once
// What a reply asks of a command's route in a cluster or behind sentinels (SPEC 8), read in one
// place for both Redis drivers: RouteAttempt (the blocking Session carries each command through
// redirects) and AsyncConnection (an event-loop connection that serves one slot moves itself).
// Each driver acts in its own way (send the command again / move the connection and let the
// caller retry); what a -MOVED, -ASK, -READONLY or -CLUSTERDOWN means is decided here.

#include "sidecar/keys/node_address.h"
#include "sidecar/redis/reply.h"
#include "sidecar/redis/topology/reply_kind.h"

namespace streamcar::redis {

enum class RouteReaction {
  kNone,         // nothing for routing: the reply is the command's answer (a value or its error)
  kFollowMoved,  // -MOVED: the slot lives at redirect.to now; the topology learns it (OnMoved)
  kFollowAsk,    // -ASK: the key is at redirect.to during a migration, for one command sent
                 // after ASKING; the topology counts it (OnAsk)
  kWait,         // -TRYAGAIN (a multi-key command split by a migration), -LOADING: a passing
                 // state of a node that still serves the slot; the same node, a little later
  kNodeDown,     // -CLUSTERDOWN, -MASTERDOWN: the node cannot serve the slot now, and may have
                 // lost its role; a little later, once the map has been read again
  kDemoted,      // -READONLY: a write reached a replica (a demoted master): find the master
  kReleased,     // -UNBLOCKED by a role change (not by MIGRATE deleting the key): a blocked
                 // command was let go by a node that is a replica now
};

struct RouteVerdict {
  RouteReaction reaction = RouteReaction::kNone;
  ReplyKind kind = ReplyKind::kValue;  // the reply's kind (for messages and metrics)
  // kFollowMoved, kFollowAsk: where to. An empty host (the node's endpoint is unknown) is filled
  // with the host that answered; "?" stays (see UsableHost).
  Redirect redirect;
};

// `reply` as answered by `answered`.
RouteVerdict ReactTo(const ReplyView& reply, const keys::NodeAddress& answered);

// False for a redirect that names no usable host ("?"): only the map can say where the slot is.
bool UsableHost(const Redirect& redirect);

}  // namespace streamcar::redis
