#include "sidecar/runtime/settlement.h"

#include <algorithm>
#include <iterator>
#include <span>
#include <utility>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/runtime/cadences.h"

namespace streamcar::runtime {
namespace {

bool IsNoGroup(std::string_view error) { return error.starts_with("NOGROUP"); }

bool HasStep(const SettlePlan& plan, SettlePlan::Step step) {
  return std::any_of(plan.spans.begin(), plan.spans.end(),
                     [&](const SettlePlan::Span& span) { return span.step == step; });
}

}  // namespace

void StepBackoff::Failed(SteadyTime now) {
  retry_at = now + ReconnectDelay(streak++, kInitial, kCap, UnitRandom());
}

Settlement::Settlement(const config::Subscription& sub, const redis::SubscriptionOps& ops,
                       EntryLedger* ledger, AttemptObserver* observer, const Clock& clock)
    : sub_(sub),
      ops_(ops),
      ledger_(ledger),
      observer_(observer),
      clock_(clock),
      dlq_{sub.dead_letter.stream, sub.dead_letter.max_len},
      keepalive_interval_(cadence::KeepaliveInterval(sub.claim.min_idle)),
      next_keepalive_(clock.Now() + keepalive_interval_) {}

void Settlement::QueueAck(std::string id, bool delivered) {
  if (!acks_since_) acks_since_ = clock_.Now();
  (delivered ? acks_ : gone_acks_).push_back(std::move(id));
}

void Settlement::QueueDeadLetter(std::string id, redis::DeadLetterMeta meta) {
  if (meta.time_ms == 0) meta.time_ms = clock_.WallMillis();
  dead_.push_back({std::move(id), std::move(meta)});
}

void Settlement::OnOutcome(const EntryRef& ref, const delivery::Decision& decision,
                           SteadyTime now) {
  if (decision.action == delivery::Action::kAck) {
    // A lost entry's 2xx still counts: acknowledged like any other (SPEC 3.2). Accept finds a
    // stale ref stale by itself (one lookup of the id instead of two: issue 34).
    if (ledger_->Accept(ref) == EntryLedger::Applied::kApplied) QueueAck(ref.id, true);
    return;
  }
  const StreamEntry* entry = ledger_->Entry(ref);
  if (entry == nullptr) return;  // stale: let go or handed out again meanwhile
  const int attempts = entry->attempts;
  EntryLedger::Applied applied = EntryLedger::Applied::kApplied;
  switch (decision.action) {
    case delivery::Action::kAck:
      return;  // above
    case delivery::Action::kRetry:
      applied = ledger_->ScheduleRetry(ref, now + decision.delay);
      if (applied == EntryLedger::Applied::kApplied) {
        LogDebug("delivery failed; will retry",
                 {{"subscription", sub_.name},
                  {"id", ref.id},
                  {"attempts", attempts},
                  {"status", decision.status_text},
                  {"retry_in_ms", static_cast<int64_t>(decision.delay.count())}});
      }
      break;
    case delivery::Action::kDeadLetter:
      applied = ledger_->DeadLetter(ref);
      if (applied == EntryLedger::Applied::kApplied) {
        QueueDeadLetter(ref.id, {std::string(delivery::Name(decision.reason)), decision.status_text,
                                 decision.error, attempts, clock_.WallMillis()});
      }
      break;
    case delivery::Action::kHold:
      return;  // the delivery keeps the entry itself
  }
  if (applied == EntryLedger::Applied::kLetGo) {
    // A peer reclaimed it while it was in flight (counted then): only a 2xx is still ours.
    LogWarn("result dropped: the entry was reclaimed by another consumer (lost lease)",
            {{"subscription", sub_.name}, {"id", ref.id}});
  }
}

std::optional<SteadyTime> Settlement::AcksDueAt() const {
  if (acks_.empty() && gone_acks_.empty()) return std::nullopt;
  const SteadyTime since = acks_since_.value_or(SteadyTime{});
  // The entries being acknowledged keep their room until the XACK lands (entry_ledger.h): past a
  // quarter of the capacity, or a whole command's worth of ids, lingering would starve intake; a
  // draining subscription has nothing left to wait for.
  const bool early = ack_linger_.count() <= 0 || draining_ || queued_acks() >= kAckFlushIds ||
                     ledger_->acking() >= ledger_->capacity() / 4;
  return early ? since : since + ack_linger_;
}

bool Settlement::AcksDue(SteadyTime now) const {
  auto at = AcksDueAt();
  return at && now >= *at && ack_backoff_.Due(now);
}

std::optional<SettlePlan> Settlement::TakeDue(SteadyTime now) {
  if (in_flight_ || !unsent_backoff_.Due(now)) return std::nullopt;
  SettleWork work;
  work.load_scripts = load_scripts_;
  if (now >= next_keepalive_) {
    work.keepalive = ledger_->KeepAliveIds();
    // Nothing to keep alive: the next beat is a whole period away.
    if (work.keepalive.empty()) next_keepalive_ = now + keepalive_interval_;
  }
  if (AcksDue(now)) {
    work.acks = std::exchange(acks_, {});
    work.gone_acks = std::exchange(gone_acks_, {});
    acks_since_.reset();
  }
  if (!dead_.empty() && dead_backoff_.Due(now)) {
    for (auto& queued : std::exchange(dead_, {})) {
      const StreamEntry* entry = ledger_->Find(queued.id);
      if (entry == nullptr) continue;  // let go meanwhile: nothing to write
      const bool written = ledger_->StateOf(queued.id) == EntryState::kDeadLetterWritten;
      DeadLetterJob job{std::move(queued.id), entry, std::move(queued.meta)};
      if (!two_step_) {
        work.dead_letters.push_back(std::move(job));
      } else if (written) {
        work.dead_letter_acks.push_back(std::move(job));  // (3) only: never a second XADD
      } else {
        work.dead_letter_checks.push_back(std::move(job));
      }
    }
  }
  // A retry claim counts a delivery; once shutdown has begun none follows, so none is claimed
  // (SPEC 3.2). The entries stay pending for this consumer's restart or a peer.
  if (!draining_ && claim_backoff_.Due(now)) work.retry_claims = ledger_->TakeDueRetries(now);
  SettlePlan plan = SettleBatch(ops_, ack_mode_, dlq_, std::move(work));
  if (plan.empty()) return std::nullopt;
  in_flight_ = true;
  return plan;
}

std::optional<SteadyTime> Settlement::NextDue(SteadyTime now) const {
  if (in_flight_) return std::nullopt;
  SteadyTime due = next_keepalive_;  // always scheduled
  if (auto at = AcksDueAt()) due = std::min(due, std::max(*at, ack_backoff_.retry_at));
  if (!dead_.empty()) due = std::min(due, dead_backoff_.retry_at);
  if (!draining_) {
    if (auto retry = ledger_->NextRetryAt()) {
      due = std::min(due, std::max(*retry, claim_backoff_.retry_at));
    }
  }
  return std::max({due, unsent_backoff_.retry_at, now});
}

bool Settlement::Idle() const {
  return !in_flight_ && !dlq_in_flight_ && acks_.empty() && gone_acks_.empty() && dead_.empty() &&
         dead_writes_.empty() && dead_unconfirmed_.empty();
}

void Settlement::CountFailure(SettleClass c, size_t n) {
  if (n == 0) return;
  observer_->OnSettleFailed(c, n);
}

void Settlement::Requeue(std::vector<std::string> ids, std::vector<std::string>* queue) {
  if (ids.empty()) return;
  // Kept work goes first, and is due as soon as its backoff allows (no second linger).
  queue->insert(queue->begin(), std::make_move_iterator(ids.begin()),
                std::make_move_iterator(ids.end()));
  acks_since_ = SteadyTime{};
}

void Settlement::Apply(const SettlePlan& plan, const redis::BatchResult& result, SteadyTime now) {
  in_flight_ = false;
  const SettleResult r = ApplySettleReplies(plan, result);
  if (result.written) {
    unsent_backoff_.Succeeded();
  } else {
    unsent_backoff_.Failed(now);
  }
  const bool loaded = plan.loads_scripts();
  if (loaded && r.scripts_answered) {
    if (r.scripts_error.empty()) {
      load_scripts_ = false;
    } else {
      LogError("cannot load scripts into Redis",
               {{"subscription", sub_.name}, {"error", r.scripts_error}});
    }
  }
  if (r.scripts_missing()) load_scripts_ = true;

  if (HasStep(plan, SettlePlan::Step::kKeepAlive)) ApplyKeepAlive(r, result.written, loaded, now);
  ApplyAcks(r, result.written, loaded, now);
  ApplyDeadLetters(r, result.written, loaded, now);
  ApplyRetryClaims(r, result.written, loaded, now);
  ApplyAmbiguous(r);

  bool no_group =
      IsNoGroup(r.ack_error) || IsNoGroup(r.claim_error) || IsNoGroup(r.keepalive_error);
  for (const auto& item : r.definite.dead_letters) no_group = no_group || IsNoGroup(item.error);
  if (no_group) group_missing_ = true;
}

void Settlement::ApplyKeepAlive(const SettleResult& r, bool sent, bool loaded, SteadyTime now) {
  for (const auto& id : r.keepalive_lost) {
    if (ledger_->MarkLost(id) == EntryLedger::LostResult::kIgnored) continue;
    CountFailure(SettleClass::kLostLease, 1);
    LogWarn("lease lost: another consumer owns the entry now; it is not delivered again here",
            {{"subscription", sub_.name}, {"id", id}, {"class", "lost_lease"}});
  }
  const bool refused = r.definite.keepalive || (r.noscript.keepalive && loaded);
  if (r.definite.keepalive) {
    CountFailure(SettleClass::kDefinite, r.definite.keepalive_ids);
    LogWarn("lease keepalive refused by Redis; trying again soon",
            {{"subscription", sub_.name}, {"class", "definite"}, {"error", r.keepalive_error}});
  }
  if (refused) {
    keepalive_backoff_.Failed(now);
    next_keepalive_ = std::min(now + keepalive_interval_, keepalive_backoff_.retry_at);
  } else if (r.noscript.keepalive) {
    next_keepalive_ = now;  // at once, behind the SCRIPT LOAD
  } else if (r.ambiguous.keepalive || !sent) {
    // Still due: the next plan repeats it once the connection is back.
  } else {
    keepalive_backoff_.Succeeded();
    next_keepalive_ = now + keepalive_interval_;
  }
}

void Settlement::ApplyAcks(const SettleResult& r, bool sent, bool loaded, SteadyTime now) {
  const int64_t now_ms = clock_.WallMillis();
  for (const auto& id : r.acked) {
    ledger_->AckConfirmed(id);
    observer_->OnAcked(id, now_ms);
  }
  for (const auto& id : r.gone_acked) {
    ledger_->AckConfirmed(id);
    observer_->OnAckedGone(id);
  }
  const size_t acked = r.acked.size() + r.gone_acked.size();
  if (progress_ != nullptr) {
    progress_->Settled(r.acked, now);
    progress_->Settled(r.gone_acked, now);
  }

  const size_t refused = r.definite.acks.size() + r.definite.gone_acks.size();
  Requeue(r.definite.acks, &acks_);
  Requeue(r.definite.gone_acks, &gone_acks_);
  if (!sent) {
    Requeue(r.unsent.acks, &acks_);
    Requeue(r.unsent.gone_acks, &gone_acks_);
  }
  // A shard's acks are scripts: after a restart or SCRIPT FLUSH they come back NOSCRIPT, not
  // run. Tried again at once behind the SCRIPT LOAD, as every scripted step is; after a delay
  // when this plan had loaded them already (the load was refused).
  const size_t noscript = r.noscript.acks.size() + r.noscript.gone_acks.size();
  Requeue(r.noscript.acks, &acks_);
  Requeue(r.noscript.gone_acks, &gone_acks_);
  if (refused > 0) {
    // SPEC 4.3 "definite": not applied; the acknowledgement is tried again after a delay.
    CountFailure(SettleClass::kDefinite, refused);
    LogError("acknowledgement refused by Redis; will retry",
             {{"subscription", sub_.name}, {"class", "definite"}, {"error", r.ack_error}});
    ack_backoff_.Failed(now);
  } else if (noscript > 0 && loaded) {
    ack_backoff_.Failed(now);
  } else if (acked > 0) {
    ack_backoff_.Succeeded();
  }
}

void Settlement::ApplyDeadLetters(const SettleResult& r, bool sent, bool loaded, SteadyTime now) {
  for (const auto& item : r.dead_lettered) {
    LogWarn("entry dead-lettered", {{"subscription", sub_.name},
                                    {"id", item.id},
                                    {"reason", item.meta.reason},
                                    {"attempts", item.meta.attempts},
                                    {"status", item.meta.status}});
    observer_->OnDeadLettered(item.id, item.meta);
    ledger_->Release(item.id);
    if (progress_ != nullptr) progress_->Settled(std::span(&item.id, 1), now);
  }
  for (const auto& id : r.dead_letter_lost) {
    CountFailure(SettleClass::kLostLease, 1);
    LogWarn("dead letter not written: the entry is no longer this consumer's (lost lease)",
            {{"subscription", sub_.name}, {"id", id}, {"class", "lost_lease"}});
    ledger_->Release(id);
  }
  // Two-step (1) passed: to the dead-letter stream's connection.
  for (const auto& item : r.dead_letter_ours) dead_writes_.push_back({item.id, item.meta});
  for (const auto& id : r.dead_letter_written_lost) {
    // Two-step (3) found a peer holding it: the letter is written (a peer may write another or
    // deliver it: a duplicate, never a loss), the entry is not acknowledged here.
    CountFailure(SettleClass::kLostLease, 1);
    LogWarn(
        "dead letter written for an entry a peer now holds; it is not acknowledged here (lost "
        "lease)",
        {{"subscription", sub_.name},
         {"id", id},
         {"class", "lost_lease"},
         {"dead_letter_stream", dlq_.stream}});
    ledger_->Release(id);
  }
  std::vector<QueuedDeadLetter> kept;
  for (const auto& item : r.definite.dead_letters) {
    // "definite": nothing was written and nothing acknowledged (the script stops at the failing
    // command; two-step: the step refused is tried again, a written record is not written
    // again). The entry stays held and pending until the step succeeds.
    LogDeadLetterRefused(item);
    kept.push_back({item.id, item.meta});
  }
  for (const auto& item : r.noscript.dead_letters) kept.push_back({item.id, item.meta});
  if (!sent) {
    for (const auto& item : r.unsent.dead_letters) kept.push_back({item.id, item.meta});
  }
  if (!r.definite.dead_letters.empty() || (loaded && !r.noscript.dead_letters.empty())) {
    dead_backoff_.Failed(now);
  } else if (!r.dead_lettered.empty() || !r.dead_letter_lost.empty() ||
             !r.dead_letter_ours.empty() || !r.dead_letter_written_lost.empty()) {
    dead_backoff_.Succeeded();
  }
  dead_.insert(dead_.begin(), std::make_move_iterator(kept.begin()),
               std::make_move_iterator(kept.end()));
}

void Settlement::LogDeadLetterRefused(const DeadLetterItem& item) {
  CountFailure(SettleClass::kDefinite, 1);
  LogError("cannot write dead letter; the entry stays pending and is tried again",
           {{"subscription", sub_.name},
            {"id", item.id},
            {"class", "definite"},
            {"dead_letter_stream", dlq_.stream},
            {"error", item.error}});
}

void Settlement::ApplyRetryClaims(const SettleResult& r, bool sent, bool loaded, SteadyTime now) {
  for (const auto& id : r.claim_lost) {
    CountFailure(SettleClass::kLostLease, 1);
    LogWarn("retry not claimed: the entry is another consumer's now (lost lease)",
            {{"subscription", sub_.name}, {"id", id}, {"class", "lost_lease"}});
    ledger_->Release(id);
  }
  for (size_t i = 0; i < r.claimed.size(); ++i) {
    // The claim counted one more delivery: the attempt about to be made. Its number is the
    // pending list's count when the reply gave it (SPEC 3.1), else one more than the last.
    const std::string& id = r.claimed[i];
    const StreamEntry* entry = ledger_->Find(id);
    if (entry == nullptr) continue;
    const int counted = i < r.claimed_attempts.size() ? r.claimed_attempts[i] : 0;
    ledger_->RetryClaimed(id, counted > 0 ? counted : entry->attempts + 1);
  }
  for (const auto& id : r.claimed_gone) {
    // Ours, but its payload is gone (deleted or trimmed while it waited): Redis 7 drops it from
    // the pending list on the claim; the acknowledgement covers older servers. It is never
    // POSTed again.
    if (!ledger_->RetryClaimedGone(id)) continue;
    observer_->OnFoundDeleted(1);
    QueueAck(id, /*delivered=*/false);
  }
  const bool refused = !r.definite.retry_claims.empty();
  if (refused) {
    // An error means "unknown", never "gone" (SPEC 3.2): every entry is kept and tried again.
    CountFailure(SettleClass::kDefinite, r.definite.retry_claims.size());
    LogError("retry claim refused by Redis; the entries stay held and are tried again",
             {{"subscription", sub_.name}, {"class", "definite"}, {"error", r.claim_error}});
  }
  if (refused || (loaded && !r.noscript.retry_claims.empty())) {
    claim_backoff_.Failed(now);
  } else if (!r.claimed.empty() || !r.claimed_gone.empty() || !r.claim_lost.empty()) {
    claim_backoff_.Succeeded();
  }
  const SteadyTime again = std::max(now, claim_backoff_.retry_at);
  for (const auto& id : r.definite.retry_claims) ledger_->RetryNotClaimed(id, again);
  for (const auto& id : r.noscript.retry_claims) ledger_->RetryNotClaimed(id, again);
  if (!sent) {
    for (const auto& id : r.unsent.retry_claims) ledger_->RetryNotClaimed(id, now);
  }
}

void Settlement::ApplyAmbiguous(const SettleResult& r) {
  // SPEC 4.3 "ambiguous": the commands may or may not have been applied. The entries are let go
  // without another write; what was not applied is still pending, and the intake reads this
  // consumer's pending list again to deliver it.
  // A retry or a dead letter still holds its ordering lane: kept until the recovery brings the
  // entry back or finds it settled (SPEC 3.5, entry_ledger.h).
  size_t released = 0;
  auto release = [&](const std::string& id) {
    ledger_->Release(id);
    ++released;
  };
  auto release_keeping_lane = [&](const std::string& id) {
    ledger_->ReleaseKeepingLane(id);
    ++released;
  };
  for (const auto& id : r.ambiguous.acks) release(id);
  for (const auto& id : r.ambiguous.gone_acks) release(id);
  for (const auto& item : r.ambiguous.dead_letters) release_keeping_lane(item.id);
  for (const auto& id : r.ambiguous.retry_claims) release_keeping_lane(id);
  CountFailure(SettleClass::kAmbiguous, released);
  if (released == 0) return;
  recovery_requested_ = true;
  LogWarn(
      "settlement ambiguous: the connection failed after sending; entries released, the "
      "pending list will bring back what was not applied",
      {{"subscription", sub_.name},
       {"class", "ambiguous"},
       {"entries", static_cast<int64_t>(released)},
       {"error", r.failure}});
}

void Settlement::LogUnsettled() const {
  if (Idle()) return;
  LogWarn("subscription stopped: outcomes not settled in time stay pending for a restart or a peer",
          {{"subscription", sub_.name},
           {"acks", static_cast<int64_t>(queued_acks())},
           {"dead_letters", static_cast<int64_t>(queued_dead_letters())}});
}

std::optional<SettlePlan> Settlement::UndoPlan() {
  SettleWork work;
  work.undo_reads = ledger_->UnpostedIds();
  if (work.undo_reads.empty()) return std::nullopt;
  work.load_scripts = load_scripts_;
  return SettleBatch(ops_, ack_mode_, dlq_, std::move(work));
}

void Settlement::ApplyUndo(const SettlePlan& plan, const redis::BatchResult& result) {
  if (!result.written) {
    LogWarn("subscription stopped: cannot take back the delivery count of entries never delivered",
            {{"subscription", sub_.name}, {"error", result.failure.message()}});
    return;
  }
  const SettleResult r = ApplySettleReplies(plan, result);
  std::string error;
  if (!result.failure.ok()) {
    error = result.failure.message();
  } else if (!r.scripts_error.empty()) {
    error = r.scripts_error;
  } else if (!r.undo_error.empty()) {
    error = r.undo_error;
  } else if (!r.noscript.undo_reads.empty()) {
    error = r.noscript_error;
  }
  if (!error.empty()) {
    LogWarn("subscription stopped: cannot take back the delivery count of entries never delivered",
            {{"subscription", sub_.name}, {"error", error}});
  }
  LogInfo("subscription stopped: entries read but never delivered keep their delivery count",
          {{"subscription", sub_.name}, {"entries", r.undone}});
}

}  // namespace streamcar::runtime
