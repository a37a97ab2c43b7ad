#pragma once
// How many replicas the master behind a connection has (ROLE), and WAIT for them: the two-step
// dead letter (SPEC 8) waits until its record reached a replica before the original is
// acknowledged on another node, so that a failover of the dead-letter stream's master right
// after the acknowledgement cannot lose the letter (replication is asynchronous).
//
// WAIT is sent only when the master has replicas: on Redis 7.0.15 `WAIT 1 1000` on a master
// without replicas does not answer 0 at once, it blocks for the whole timeout.

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/reply.h"

namespace streamcar::redis {

// ROLE.
Command RoleProbe();
// The replicas a master's ROLE reply lists, or kNotAMaster for a replica (a master demoted in a
// failover: what it was sent may be dropped when it resyncs); the error reply (NOPERM: ROLE is
// an @admin command) as a Status.
constexpr int kNotAMaster = -1;
StatusOr<int> ParseReplicaCount(const ReplyView& reply);
// WAIT <replicas> <timeout ms>. ParseReplicasAcked: how many acknowledged the writes before it.
Command WaitForReplicas(int replicas, Millis timeout);
StatusOr<int64_t> ParseReplicasAcked(const ReplyView& reply);

}  // namespace streamcar::redis
