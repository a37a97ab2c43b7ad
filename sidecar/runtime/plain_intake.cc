#include "sidecar/runtime/plain_intake.h"

#include <algorithm>
#include <utility>

#include "sidecar/common/log.h"

namespace streamcar::runtime {

using redis::BatchResult;
using redis::Reply;
using redis::SubscriptionOps;

PlainIntake::PlainIntake(const SourceParts& parts) : GroupIntake(parts) {
  reclaim_timer_ = loop_.CreateTimer([this] { ReclaimBeat(); });
}

// --- new entries ----------------------------------------------------------------------------

void PlainIntake::ReadNew(size_t count) {
  read_asked_ = count;
  read_busy_ = true;
  BeginBlockingRead();
  read_->SendBlocking(ops_.ReadNew(static_cast<int>(count), kBlock), kBlock,
                      Guard([this](StatusOr<Reply> reply) { OnReadNew(std::move(reply)); }));
}

void PlainIntake::OnReadNew(StatusOr<Reply> reply) {
  EndBlockingRead();
  StatusOr<std::vector<StreamEntry>> entries =
      reply.ok() ? SubscriptionOps::ParseRead(reply->view())
                 : StatusOr<std::vector<StreamEntry>>(reply.status());
  if (!entries.ok()) {
    read_busy_ = false;
    return ReadFailed(entries.status());
  }
  RouteNew(std::move(*entries));
}

// --- the reclaim beat -----------------------------------------------------------------------

bool PlainIntake::OwnStep() {
  if (reclaim_due_) {
    ReclaimNext();
    return true;
  }
  if (reap_due_) {
    ReapNext();
    return true;
  }
  return false;
}

void PlainIntake::OnDrained() { reclaim_timer_->ArmIn(sub_.claim.interval); }

void PlainIntake::EndOwnSteps(bool stopping) {
  reclaim_timer_->Cancel();
  if (stopping && reaper_ != nullptr) reaper_->Stop();
}

void PlainIntake::ReclaimBeat() {
  if (stopping() || !past_drain()) return;
  reclaim_due_ = true;
  if (reaper_ != nullptr && reaper_->Due(loop_.clock().Now())) reap_due_ = true;
  Pump();
}

void PlainIntake::ReclaimNext() {
  // Exhausted and deleted entries take room too, so a dead peer's long PEL is followed only as
  // far as there is room; the cursor is kept for the next beat.
  const size_t room = ledger_->ReadRoom();
  if (room == 0) {
    ReclaimEnd();
    return Pump();
  }
  const size_t count = std::min(room, static_cast<size_t>(std::max(sub_.claim.count, 1)));
  read_busy_ = true;
  SendRaw(read_, ops_.AutoClaim(sub_.claim.min_idle, reclaim_cursor_, static_cast<int>(count)),
          Guard([this](StatusOr<Reply> reply) {
            StatusOr<redis::AutoClaimReply> claimed =
                reply.ok() ? SubscriptionOps::ParseAutoClaim(reply->view())
                           : StatusOr<redis::AutoClaimReply>(reply.status());
            if (!claimed.ok()) return ReclaimFailed(claimed.status(), false);
            if (claimed->entries.empty()) return ReclaimRoute(std::move(*claimed));
            auto shared = std::make_shared<redis::AutoClaimReply>(std::move(*claimed));
            read_->SendBatch(ops_.DeliveryCounts(shared->entries), read_->command_timeout(),
                             Guard([this, shared](const BatchResult& counts) {
                               const Status status = counts.failure.ok()
                                                         ? SubscriptionOps::ApplyDeliveryCounts(
                                                               counts.replies, &shared->entries)
                                                         : counts.failure;
                               if (!status.ok()) return ReclaimFailed(status, true);
                               ReclaimRoute(std::move(*shared));
                             }));
          }));
}

void PlainIntake::ReclaimFailed(const Status& status, bool claimed) {
  read_busy_ = false;
  if (!status.IsServerError("NOGROUP")) {  // the next read meets it too, and re-creates the group
    LogWarn("reclaim beat failed", {{"subscription", sub_.name}, {"error", status.message()}});
  }
  // Claimed to this consumer, their counts unknown: the own-PEL re-read brings them in with
  // their counts rather than after another claim.min_idle.
  if (claimed) WantRecovery();
  ReclaimEnd();
  Pump();
}

void PlainIntake::ReclaimRoute(redis::AutoClaimReply claimed) {
  reclaim_cursor_ = std::move(claimed.next_cursor);
  std::vector<StreamEntry> entries = std::move(claimed.entries);
  for (auto& id : claimed.deleted_ids) {
    StreamEntry gone;
    gone.id = std::move(id);
    gone.deleted = true;
    entries.push_back(std::move(gone));
  }
  Route(std::move(entries), IntakeSource::kReclaim);
  read_busy_ = false;
  // Not at the end of the scan: the next step goes on from the cursor, within this beat.
  if (reclaim_cursor_ == "0-0") ReclaimEnd();
  Pump();
}

void PlainIntake::ReclaimEnd() {
  reclaim_due_ = false;
  if (!stopping() && past_drain()) reclaim_timer_->ArmIn(sub_.claim.interval);
}

// --- consumer reaping (SPEC 4.6) ------------------------------------------------------------

void PlainIntake::ReapNext() {
  reap_due_ = false;
  read_busy_ = true;
  reaper_->Run(read_, loop_.clock().Now(), Guard([this] {
                 read_busy_ = false;
                 if (reaper_->TakeRecoveryRequest()) WantRecovery();
                 // A pass never ends the subscription: an ACL refusal only turned reaping off.
                 Pump();
               }));
}

}  // namespace streamcar::runtime
