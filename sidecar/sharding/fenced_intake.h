#pragma once
// The entry source of one shard of a sharded subscription (SHARDING.md B5): a consumer of the
// shard's group (runtime/group_intake.h) whose every step runs behind the shard's fence with the
// token of this member's grant (sharding/fenced_ops.h):
//   - setting the group up installs the fence; where the shard's master has a replica, a WAIT
//     then makes sure the install reached it before the first read (B5.1);
//   - the start-up drain of the own pending list is the takeover: it claims every pending entry
//     of the shard, whoever read it, in id order, before anything new;
//   - a read of new entries is the fenced read: the fence watched and checked, then the read in
//     the watched transaction (two round trips). It never blocks; one that finds nothing is
//     followed by a wait (XREAD BLOCK after the shard's last id) that changes nothing, so a
//     member paused while it waits cannot take entries a newer owner is handling;
//   - there is no reclaim beat (the takeover claimed everyone's entries);
//   - a step the fence refuses (FENCED or STALE: a newer owner installed its token) ends the
//     intake (EntrySource::Callbacks::refused).
//
// Threads: loop thread only.

#include <cstddef>
#include <cstdint>
#include <string>

#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/group_intake.h"
#include "sidecar/runtime/ownership.h"
#include "sidecar/sharding/fenced_ops.h"

namespace streamcar::sharding {

class FencedIntake final : public runtime::GroupIntake {
 public:
  // How long a takeover waits for a replica to have the fence it installed (at most half the
  // command timeout).
  static constexpr Millis kFenceReplicaWait{1000};

  // `fenced` are `parts.ops`. Everything outlives this object.
  FencedIntake(const runtime::SourceParts& parts, const FencedShardOps& fenced);

 private:
  // WAIT 1 after the fence's install when the shard's master has a replica (B5.1).
  void ConfirmGroup() override;
  void WaitForReplica(int replicas);
  // The fenced read: the fence watched and checked, then the watched transaction; the wait
  // after one that found nothing.
  void ReadNew(size_t count) override;
  void OnFenceChecked(size_t count, uint64_t watched_on, redis::BatchResult watched);
  void ReadWatched(size_t count);
  void WaitForNew(const std::string& tail_id);

  const FencedShardOps& fenced_;
};

}  // namespace streamcar::sharding
