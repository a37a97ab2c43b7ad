// The two-step dead letters of a subscription whose dead-letter stream is in another slot than
// its stream (SPEC 8, settlement.h): the records XADDed on a connection of their own to the
// dead-letter stream's master, confirmed by a replica (WAIT) before the originals are
// acknowledged, written again when that master may have failed over without them.

#include <algorithm>
#include <iterator>
#include <utility>

#include "sidecar/common/log.h"
#include "sidecar/redis/acl_refusal.h"
#include "sidecar/redis/replica_wait.h"
#include "sidecar/runtime/settlement.h"

namespace streamcar::runtime {

namespace {

// A refusal no retry changes: the ACL, or a server without the command.
bool IsRefused(const Status& status) {
  return redis::IsAclRefusal(status) ||
         (status.IsServerError("ERR") &&
          status.message().find("unknown command") != std::string::npos);
}

// The node stopped being a master under the connection: a failover demoted it.
bool IsDemoted(const Status& status) {
  return status.IsServerError("UNBLOCKED") || status.IsServerError("READONLY") ||
         status.message().find("replica") != std::string::npos;
}

}  // namespace

void Settlement::OnDeadLetterConnectionReady() {
  dlq_unsent_backoff_.Succeeded();
  // Perhaps another master now (a failover): its replicas are asked before the next WAIT.
  dlq_replicas_.reset();
  dlq_role_refused_ = false;
  // Written on the connection that is gone, and no replica confirmed them: the old master may
  // have failed over without them. A WAIT here would say nothing about them.
  WriteHeldAgain(
      "dead letters no replica confirmed before their connection was lost are written "
      "again");
}

void Settlement::WriteHeldAgain(std::string_view why) {
  if (dead_unconfirmed_.empty()) return;
  LogWarn(why, {{"subscription", sub_.name},
                {"dead_letter_stream", dlq_.stream},
                {"entries", static_cast<int64_t>(dead_unconfirmed_.size())}});
  std::vector<QueuedDeadLetter> again;
  for (auto& queued : std::exchange(dead_unconfirmed_, {})) {
    if (ledger_->DeadLetterUnwritten(queued.id)) again.push_back(std::move(queued));
  }
  dead_writes_.insert(dead_writes_.begin(), std::make_move_iterator(again.begin()),
                      std::make_move_iterator(again.end()));
  confirm_backoff_.Succeeded();
  held_warned_at_.reset();
}

std::optional<SteadyTime> Settlement::DeadLetterWritesDueAt() const {
  if (dlq_in_flight_) return std::nullopt;
  std::optional<SteadyTime> due;
  if (!dead_writes_.empty()) due = dlq_unsent_backoff_.retry_at;
  if (!dead_unconfirmed_.empty()) {
    const SteadyTime confirm = std::max(confirm_backoff_.retry_at, dlq_unsent_backoff_.retry_at);
    due = due ? std::min(*due, confirm) : confirm;
  }
  return due;
}

Settlement::ReplicasListed Settlement::ListedReplicas(std::optional<int> map_replicas) const {
  if ((map_replicas && *map_replicas > 0) || (dlq_replicas_ && *dlq_replicas_ > 0)) {
    return ReplicasListed::kSome;
  }
  // ROLE alone never says none: the map may not know the node (a master learned from a -MOVED,
  // typically a replica just promoted), or the connection may be on another node than the map's
  // master (KnownReplicas says nullopt then).
  if (map_replicas) return ReplicasListed::kNone;
  if (!cluster_map_ && dlq_replicas_) return ReplicasListed::kNone;  // ROLE is all there is
  return ReplicasListed::kUnknown;
}

std::optional<SettlePlan> Settlement::TakeDeadLetterWrites(SteadyTime now,
                                                           std::optional<int> map_replicas) {
  const bool confirm_due = !dead_unconfirmed_.empty() && confirm_backoff_.Due(now);
  if (!two_step_ || dlq_in_flight_ || (dead_writes_.empty() && !confirm_due) ||
      !dlq_unsent_backoff_.Due(now)) {
    return std::nullopt;
  }
  DeadLetterWriteWork work;
  work.confirm = confirm_due;
  for (auto& queued : std::exchange(dead_writes_, {})) {
    const StreamEntry* entry = ledger_->Find(queued.id);
    if (entry == nullptr) continue;  // let go meanwhile: nothing to write
    work.writes.push_back({std::move(queued.id), entry, std::move(queued.meta)});
  }
  // WAIT unless no source lists a replica (it would block its whole timeout for nothing). Held
  // letters are asked about whatever is listed now: ApplyReplicaReplies decides what 0 means.
  if (!dead_unconfirmed_.empty() || ListedReplicas(map_replicas) != ReplicasListed::kNone) {
    work.wait_replicas = 1;
    work.wait_timeout = kReplicaWait;
  }
  // Last, after the WAIT: whether the node is still a master, and its replicas now.
  work.probe = !dlq_role_refused_;
  SettlePlan plan = DeadLetterWriteBatch(ops_, dlq_, std::move(work));
  if (plan.empty()) return std::nullopt;
  dlq_in_flight_ = true;
  return plan;
}

void Settlement::ApplyDeadLetterWrites(const SettlePlan& plan, const redis::BatchResult& result,
                                       SteadyTime now, std::optional<int> map_replicas) {
  dlq_in_flight_ = false;
  const SettleResult r = ApplySettleReplies(plan, result);
  if (result.written) {
    dlq_unsent_backoff_.Succeeded();
  } else {
    dlq_unsent_backoff_.Failed(now);
  }
  const Confirmation confirmation = ApplyReplicaReplies(
      r, r.dead_letter_written.size(), plan.Has(SettlePlan::Step::kReplicaWait), map_replicas, now);
  // (2) done: only the owned acknowledgement is left, on the stream's connection, once a replica
  // has the letter.
  for (const auto& item : r.dead_letter_written) {
    if (!ledger_->DeadLetterWritten(item.id)) continue;
    (confirmation == Confirmation::kConfirmed ? dead_ : dead_unconfirmed_)
        .push_back({item.id, item.meta});
  }
  if (confirmation == Confirmation::kConfirmed) {
    // This plan's WAIT covered every earlier write of the connection too.
    dead_.insert(dead_.end(), std::make_move_iterator(dead_unconfirmed_.begin()),
                 std::make_move_iterator(dead_unconfirmed_.end()));
    dead_unconfirmed_.clear();
    held_warned_at_.reset();
  } else if (confirmation == Confirmation::kWriteAgain) {
    // The node is no master any more (demoted in a failover): it will drop what it did not pass
    // on. The connection follows the slot to the new master (the loop asks it to); the letters
    // are written there.
    dlq_replicas_.reset();
    dlq_master_demoted_ = true;
    dlq_unsent_backoff_.Failed(now);  // not at once on this node
    WriteHeldAgain(
        "the dead-letter stream's master was demoted before a replica confirmed the dead letters; "
        "they are written again");
  }
  std::vector<QueuedDeadLetter> kept;
  for (const auto& item : r.definite.dead_letters) {
    // Nothing written: checked again, then written, after the backoff.
    LogDeadLetterRefused(item);
    kept.push_back({item.id, item.meta});
  }
  if (!kept.empty()) {
    dead_backoff_.Failed(now);
  } else if (!r.dead_letter_written.empty()) {
    dead_backoff_.Succeeded();
  }
  dead_.insert(dead_.begin(), std::make_move_iterator(kept.begin()),
               std::make_move_iterator(kept.end()));
  if (!result.written) {
    std::vector<QueuedDeadLetter> unsent;
    unsent.reserve(r.unsent.dead_letters.size());
    for (const auto& item : r.unsent.dead_letters) unsent.push_back({item.id, item.meta});
    dead_writes_.insert(dead_writes_.begin(), std::make_move_iterator(unsent.begin()),
                        std::make_move_iterator(unsent.end()));
  }
  // (2) sent without an answer: perhaps written. Released; the pending list brings the entry
  // back (a second letter at worst, never none).
  ApplyAmbiguous(r);
}

Settlement::Confirmation Settlement::ApplyReplicaReplies(const SettleResult& r, size_t written,
                                                         bool asked_wait,
                                                         std::optional<int> map_replicas,
                                                         SteadyTime now) {
  const size_t waiting = written + dead_unconfirmed_.size();
  const bool demoted = NoteRole(r);
  if (demoted ||
      (!r.wait_error.empty() && IsDemoted(Status(StatusCode::kServerError, r.wait_error)))) {
    confirm_backoff_.Failed(now);
    return Confirmation::kWriteAgain;
  }
  if (asked_wait) {
    if (auto settled = ConfirmationByWait(r, waiting, now)) return *settled;
  }
  // No replica confirmed (WAIT said 0, or was not asked as none was listed then).
  return WithoutAReplicasWord(waiting, asked_wait, map_replicas, now);
}

bool Settlement::NoteRole(const SettleResult& r) {
  if (!r.probe_answered) return false;
  if (r.replicas.ok() && *r.replicas == redis::kNotAMaster) return true;
  if (r.replicas.ok()) {
    dlq_replicas_ = *r.replicas;
  } else if (IsRefused(r.replicas.status())) {
    if (!dlq_role_refused_) {
      dlq_role_refused_ = true;
      LogWarn(
          "cannot ask the dead-letter stream's master for its role; a demotion is noticed by "
          "WAIT and the cluster map alone",
          {{"subscription", sub_.name},
           {"dead_letter_stream", dlq_.stream},
           {"error", r.replicas.status().message()}});
    }
  }
  // Else (BUSY, LOADING, ...): the last answer stands; ROLE goes with the next plan.
  return false;
}

std::optional<Settlement::Confirmation> Settlement::ConfirmationByWait(const SettleResult& r,
                                                                       size_t waiting,
                                                                       SteadyTime now) {
  if (!r.wait_error.empty()) {
    if (IsRefused(Status(StatusCode::kServerError, r.wait_error))) {
      // WAIT refused (an ACL): nothing can confirm a letter, and holding them would stop dead
      // letters for good.
      if (waiting > 0) {
        LogWarn("dead letter written; waiting for a replica failed, the original is acknowledged",
                {{"subscription", sub_.name},
                 {"dead_letter_stream", dlq_.stream},
                 {"error", r.wait_error}});
      }
      return Confirmation::kConfirmed;
    }
    confirm_backoff_.Failed(now);  // BUSY, LOADING, ...: asked again
    return Confirmation::kHeld;
  }
  if (!r.replicas_acked) {
    // Not answered: the connection failed. Its readiness writes held letters again; until then
    // nothing says a replica has them.
    confirm_backoff_.Failed(now);
    return Confirmation::kHeld;
  }
  if (*r.replicas_acked > 0) {
    confirm_backoff_.Succeeded();
    return Confirmation::kConfirmed;  // a replica has every write of this connection so far
  }
  return std::nullopt;  // WAIT said 0
}

Settlement::Confirmation Settlement::WithoutAReplicasWord(size_t waiting, bool asked_wait,
                                                          std::optional<int> map_replicas,
                                                          SteadyTime now) {
  const ReplicasListed listed = ListedReplicas(map_replicas);
  if (listed == ReplicasListed::kUnknown && !cluster_map_) {
    // No map, and ROLE refused (or never answered): nothing will ever say whether the master has
    // a replica, and a master without one never confirms.
    return ConfirmedWithoutReplica(
        "dead letter written; no replica confirmed it within 1 s, the original is acknowledged",
        waiting);
  }
  switch (listed) {
    case ReplicasListed::kSome:
    case ReplicasListed::kUnknown:
      // Held, WAIT asked again, also once ROLE lists none while the map still does (that replica
      // may be the one a partition promotes, and this master rejoin as its replica without the
      // letters), and while the map cannot say for this node (the slot moved under the
      // connection: it follows, and its readiness writes the letters again). Not asked yet (a
      // replica appeared since the plan): asked at once.
      if (!asked_wait) {
        confirm_backoff_.Succeeded();
        return Confirmation::kHeld;
      }
      return Held(waiting, map_replicas, now);
    case ReplicasListed::kNone:
      // Neither the map nor ROLE lists one: the replica failed for good (or there never was
      // one). Nothing could ever confirm these letters; holding them would stop the subscription.
      return ConfirmedWithoutReplica(
          "dead letter written; the dead-letter stream's master has no replica to confirm it, the "
          "original is acknowledged",
          asked_wait ? waiting : 0);  // not asked: none was listed when it was written
  }
  return Confirmation::kHeld;
}

Settlement::Confirmation Settlement::ConfirmedWithoutReplica(std::string_view why, size_t waiting) {
  if (waiting > 0) {
    LogWarn(why, {{"subscription", sub_.name},
                  {"dead_letter_stream", dlq_.stream},
                  {"entries", static_cast<int64_t>(waiting)}});
  }
  confirm_backoff_.Succeeded();
  return Confirmation::kConfirmed;
}

Settlement::Confirmation Settlement::Held(size_t waiting, std::optional<int> map_replicas,
                                          SteadyTime now) {
  if (!held_warned_at_ || now - *held_warned_at_ >= kHeldWarnEvery) {
    const bool first = !held_warned_at_;
    held_warned_at_ = now;
    LogWarn(first ? "dead letter written; no replica confirmed it within 1 s, the original stays "
                    "pending until one does"
                  : "dead letters still held: no replica has confirmed them, the originals stay "
                    "pending",
            {{"subscription", sub_.name},
             {"dead_letter_stream", dlq_.stream},
             {"entries", static_cast<int64_t>(waiting)},
             {"replicas_listed", static_cast<int64_t>(map_replicas.value_or(-1))},
             {"replicas_connected", static_cast<int64_t>(dlq_replicas_.value_or(-1))}});
  }
  confirm_backoff_.Failed(now);
  return Confirmation::kHeld;
}

}  // namespace streamcar::runtime
