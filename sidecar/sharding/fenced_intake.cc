#include "sidecar/sharding/fenced_intake.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "sidecar/common/log.h"
#include "sidecar/redis/acl_refusal.h"
#include "sidecar/redis/replica_wait.h"

namespace streamcar::sharding {

using redis::BatchResult;
using redis::Reply;
using runtime::SendRaw;

FencedIntake::FencedIntake(const runtime::SourceParts& parts, const FencedShardOps& fenced)
    : GroupIntake(parts), fenced_(fenced) {}

// --- the install reaches a replica (B5.1) -----------------------------------------------------

void FencedIntake::ConfirmGroup() {
  if (read_->generation() != group_ensured_on()) {
    // Reconnected since the install: a WAIT here would count the new connection's writes (none)
    // and confirm nothing. Install again (the same token: idempotent), then wait for that.
    return SetupRestart();
  }
  // The install reaches a replica before the first read, so that a failover of the shard's
  // master right after it cannot roll the fence back under a reading owner. Only takeovers pay
  // for it, and only where the master has replicas: WAIT on a master without any blocks its
  // whole timeout (redis/replica_wait.h). The cluster map says how many; elsewhere (standalone,
  // sentinel, a map that does not know yet) ROLE does.
  if (const std::optional<int> listed = read_->KnownReplicas()) return WaitForReplica(*listed);
  SendRaw(read_, redis::RoleProbe(), Guard([this](StatusOr<Reply> reply) {
            read_busy_ = false;
            StatusOr<int> replicas = reply.ok() ? redis::ParseReplicaCount(reply->view())
                                                : StatusOr<int>(reply.status());
            if (replicas.ok() && *replicas == redis::kNotAMaster) {
              read_->FollowDemotedMaster("ROLE says the node is a replica now");
              return SetupFailed(
                  Status(StatusCode::kServerError, "READONLY the shard's node is a replica now"));
            }
            if (!replicas.ok() && replicas.status().code() != StatusCode::kServerError) {
              return SetupFailed(replicas.status());
            }
            // ROLE refused (an ACL without @admin): nothing says a replica exists; no WAIT.
            WaitForReplica(replicas.ok() ? *replicas : 0);
          }));
}

void FencedIntake::WaitForReplica(int replicas) {
  if (replicas <= 0) return SetupContinue();
  read_busy_ = true;
  const Millis timeout = std::min(kFenceReplicaWait, read_->command_timeout() / 2);
  SendRaw(read_, redis::WaitForReplicas(1, timeout), Guard([this, timeout](StatusOr<Reply> reply) {
            read_busy_ = false;
            StatusOr<int64_t> acked = reply.ok() ? redis::ParseReplicasAcked(reply->view())
                                                 : StatusOr<int64_t>(reply.status());
            if (!acked.ok() && acked.status().code() == StatusCode::kServerError &&
                acked.status().message().find("replica") != std::string::npos) {
              // "WAIT cannot be used with replica instances": the node was demoted, and the
              // install may be dropped as it resyncs: install again on the new master.
              read_->FollowDemotedMaster("WAIT says the node is a replica now");
              return SetupFailed(acked.status());
            }
            if (!acked.ok() && acked.status().code() != StatusCode::kServerError) {
              return SetupFailed(acked.status());  // the connection failed: from the install
            }
            if (!acked.ok() || *acked < 1) {
              // The fence stays as safe as Redis replication is (B5.1); the shard is read.
              LogWarn("shard fence not confirmed by a replica; reading anyway",
                      {{"subscription", sub_.name},
                       {"shard", sub_.stream},
                       {"token", fenced_.token()},
                       {"wait_ms", static_cast<int64_t>(timeout.count())},
                       {"error", acked.ok() ? std::string() : acked.status().message()}});
            }
            SetupContinue();
          }));
}

// --- the fenced read --------------------------------------------------------------------------

void FencedIntake::ReadNew(size_t count) {
  // The fenced read in two round trips (FencedShardOps::WatchFence): the WATCH, the token and
  // MULTI, then the read inside the transaction, which runs only if the fence is unchanged since.
  if (read_->FollowingAsk()) {
    // The slot is migrating: an ASKING before each command would be queued inside the
    // transaction. Wait until the connection goes back to the slot's master (it does after a
    // second; it follows the -ASK again while the migration runs).
    PauseSteps(kRoutingPause);
    return;
  }
  if (!read_->ready()) return;  // ending the -ASK: the connection moves; OnReady pumps again
  read_asked_ = count;
  read_busy_ = true;
  const uint64_t watched_on = read_->generation();
  read_->SendBatch(fenced_.WatchFence(), read_->command_timeout(),
                   Guard([this, count, watched_on](BatchResult watched) {
                     OnFenceChecked(count, watched_on, std::move(watched));
                   }));
}

void FencedIntake::OnFenceChecked(size_t count, uint64_t watched_on, BatchResult watched) {
  FencedShardOps::FenceCheck check;
  if (watched.failure.ok()) {
    check = fenced_.CheckFence(watched.replies);
  } else {
    check.status = watched.failure;
  }
  // The reply came on this connection, so the transaction it opened is open on it; checked all
  // the same, since on any other connection the read would run unchecked.
  const bool same_connection = read_->generation() == watched_on;
  if (check.status.ok() && !stopping() && same_connection) return ReadWatched(count);
  if (check.in_transaction && same_connection) {
    // Closed before anything else goes out on the connection: later commands (the wait, a
    // takeover step) would be queued instead of run. A close that is refused leaves it open,
    // which the next check sees and closes then; an ACL refusal of it is fatal.
    SendRaw(read_, FencedShardOps::CloseTransaction(), Guard([this](StatusOr<Reply> closed) {
              if (!closed.ok() && redis::IsAclRefusal(closed.status())) {
                ReadFailed(closed.status());
              }
            }));
  }
  read_busy_ = false;
  if (!check.status.ok()) return ReadFailed(check.status);
  if (stopping()) return MaybeFinishStop();
  Pump();
}

void FencedIntake::ReadWatched(size_t count) {
  read_->SendBatch(fenced_.ReadWatched(static_cast<int>(count)), read_->command_timeout(),
                   Guard([this](BatchResult result) {
                     StatusOr<std::optional<FencedRead>> read =
                         result.failure.ok() ? FencedShardOps::ParseWatchedRead(result.replies)
                                             : StatusOr<std::optional<FencedRead>>(result.failure);
                     if (!read.ok()) {
                       read_busy_ = false;
                       return ReadFailed(read.status());
                     }
                     if (!read->has_value()) {
                       // The fence was written since the WATCH (a newer owner's install): EXEC
                       // read nothing. The next check finds the new token and stops the shard.
                       return EndStep();
                     }
                     FencedRead& taken = **read;
                     if (taken.entries.empty()) {
                       if (stopping()) {
                         read_busy_ = false;
                         return MaybeFinishStop();
                       }
                       return WaitForNew(taken.tail_id);  // the read connection stays busy
                     }
                     RouteNew(std::move(taken.entries));
                   }));
}

void FencedIntake::WaitForNew(const std::string& tail_id) {
  // A plain XREAD: it changes nothing (no PEL entry, no last-delivered id), so a member paused
  // while it waits cannot take entries a newer owner is handling (SHARDING.md B5). Whatever it
  // returns only means "read again"; the fenced read takes the entries.
  BeginBlockingRead();
  read_->SendBlocking(fenced_.WaitForNew(tail_id, kBlock), kBlock,
                      Guard([this](StatusOr<Reply> reply) {
                        EndBlockingRead();
                        read_busy_ = false;
                        if (!reply.ok()) return ReadFailed(reply.status());
                        Pump();
                      }));
}

}  // namespace streamcar::sharding
