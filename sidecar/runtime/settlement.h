#pragma once
// The settlement of one subscription: the work not yet confirmed by Redis (acknowledgements,
// dead letters, retry claims, the lease keepalive), turned into at most one pipeline at a time
// (settle_batch.h), and what its replies say applied to the ledger, counted and logged by class
// (SPEC 4.3):
//   - lost_lease (a dead letter or retry claim found the entry another consumer's; a keepalive
//     found a held entry another's): the entry is let go here, never delivered or dead-lettered
//     again (a 2xx result is still acknowledged: the ledger keeps a lost in-flight entry);
//   - definite (an error reply): the work stays queued while the entry stays held, and its step
//     is tried again after a capped, jittered delay (100 ms doubling to 5 s);
//   - ambiguous (sent, no whole answer): the entries are released without another write and a
//     recovery is requested: the intake reads this consumer's pending list again, which brings
//     back whatever was not applied.
// Two-step dead letters (SPEC 8; settle_batch.h): when the dead-letter stream is in another slot
// than the stream (a cluster), a dead letter is (1) checked to be still ours and (3) acknowledged
// by an owner-checked script on the stream's connection, and (2) XADDed on a connection of its own
// to the dead-letter stream's master in between, followed there by WAIT for a replica when that
// master may have one, and by ROLE (is the node still a master?). Whether it has one is what the
// cluster map lists for that node (its replicas not marked failed) or the last ROLE said; only the
// map listing none (and ROLE none connected) skips the WAIT, which on a master without replicas
// would block its whole timeout; a map that cannot say for that node counts as a replica listed
// (a master learned from a -MOVED, a slot that moved under the connection). The ledger's sub-state
// kDeadLetterWritten records (2): a retry after a failed (3) repeats only (3), never the XADD. A
// letter that no replica has confirmed while a replica is listed is held unconfirmed, not
// acknowledged: were that master to fail over now, the letter would be gone and the original
// acknowledged. WAIT is asked again on the same connection (it covers every earlier write of
// that connection) with the dead-letter backoff, and a warning repeats every kHeldWarnEvery
// while letters are held. Once the map lists no replica for that node and ROLE none connected
// (it failed for good), held letters are acknowledged with a warning: nothing could ever confirm
// them. Should the connection be lost first, what became of the letter is unknown and it is
// written again (a second letter at worst, never none); should ROLE or WAIT say the node was
// demoted, the connection follows the slot to the new master (TakeDeadLetterMasterDemoted) and
// the letters are written again there. Classes: (1) or (3) refused, or (2) refused -> definite
// (tried again with the dead-letter backoff; a refused XADD is checked again first); (2) or (3)
// sent without an answer -> ambiguous (released; the pending list brings the entry back: at worst
// a second letter, never none); (1) not ours -> lost_lease, nothing written, as the one-step
// script; (3) not ours -> lost_lease, the letter stays written (logged as such). Work that never
// reached Redis (the connection was down) stays queued, unclassed, and is sent again once the
// connection is back (after OnConnectionReady, or a capped delay). A NOSCRIPT reply (Redis
// restarted, SCRIPT FLUSH) is not a failure either: the next plan loads the scripts first.
//
// Single-threaded: the subscription's loop thread makes every call. No I/O and no waiting: the
// loop sends the plan TakeDue returns and hands its result to Apply; time is passed in (the clock
// is read for the wall time of dead-letter records and the end-to-end latency, and for when an
// acknowledgement was queued).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/config/config.h"
#include "sidecar/delivery/outcome.h"
#include "sidecar/redis/async_connection.h"
#include "sidecar/redis/dead_letter_record.h"
#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/attempt_observer.h"
#include "sidecar/runtime/entry_ledger.h"
#include "sidecar/runtime/progress_report.h"
#include "sidecar/runtime/settle_batch.h"

namespace streamcar::runtime {

// A step that failed is tried again after a capped, jittered delay: ReconnectDelay(streak, 100 ms,
// 5 s), so 50-100 ms after the first failure, doubling to at most 5 s.
struct StepBackoff {
  static constexpr Millis kInitial{100};
  static constexpr Millis kCap{5000};
  int streak = 0;
  SteadyTime retry_at{};
  bool Due(SteadyTime now) const { return now >= retry_at; }
  void Failed(SteadyTime now);
  void Succeeded() {
    streak = 0;
    retry_at = SteadyTime{};
  }
};

class Settlement {
 public:
  // Acknowledgements flush early, whatever the linger, once this many are queued.
  static constexpr size_t kAckFlushIds = kIdsPerCommand;
  // How long a two-step dead letter waits for a replica to have its record (WAIT's timeout).
  static constexpr Millis kReplicaWait{1000};
  // While two-step letters are held unconfirmed, the warning that says so repeats this often.
  static constexpr Millis kHeldWarnEvery{30000};

  // `ledger`, `ops` and `observer` outlive the settlement.
  Settlement(const config::Subscription& sub, const redis::SubscriptionOps& ops,
             EntryLedger* ledger, AttemptObserver* observer, const Clock& clock);

  // Known after the group setup, before any outcome.
  void SetAckMode(redis::AckMode mode) { ack_mode_ = mode; }
  // The dead-letter stream is in another slot than the stream (SPEC 8): dead letters take the
  // two-step path (above). Set once, before any outcome. `cluster_map`: a cluster map lists the
  // dead-letter master's replicas (always in production: two-step exists only in a cluster), and
  // a count it cannot give holds letters; without one (the runtime's integration tests force
  // two-step on a standalone server), ROLE alone decides.
  void UseTwoStepDeadLetters(bool cluster_map) {
    two_step_ = true;
    cluster_map_ = cluster_map;
  }
  bool two_step() const { return two_step_; }
  // Every confirmed acknowledgement and dead letter is reported to `report` (outlives this).
  void ReportProgressTo(ProgressReport* report) { progress_ = report; }
  // Acknowledge `id`, which the ledger holds kAcking (Accept, AdmitForAck, RetryClaimedGone).
  // `delivered`: a 2xx (counted in the end-to-end latency); false: its payload is gone.
  void QueueAck(std::string id, bool delivered);
  // Dead-letter `id`, which the ledger holds kDeadLettering; the record is built from the
  // ledger's entry when the plan is made. A meta without a time gets the clock's wall time.
  void QueueDeadLetter(std::string id, redis::DeadLetterMeta meta);
  // What the handler's answer decided for the delivery `ref` (the old settler's intake of
  // outcomes): a 2xx is accepted and acknowledged, a retry waits `decision.delay` from `now`, a
  // dead letter is queued with its record metadata (the time from the clock). An entry a peer
  // reclaimed while it was in flight keeps only a 2xx (SPEC 3.2): any other result is dropped
  // and logged. A stale ref does nothing.
  void OnOutcome(const EntryRef& ref, const delivery::Decision& decision, SteadyTime now);
  // Shutdown, stage 1: no retry claim from now on (a claim counts a delivery, SPEC 3.2); the
  // entries waiting stay pending for a restart or a peer. Everything else still settles.
  void BeginDraining() { draining_ = true; }
  // Acknowledgements wait up to `linger` to share a command (default 0: the next plan carries
  // them), but never while the ledger holds a quarter of its capacity or more only for them, nor
  // once kAckFlushIds are queued (their room must not starve intake), nor while draining.
  void SetAckLinger(Millis linger) { ack_linger_ = linger; }
  // The connection is (back) up: work that could not be sent goes in the next plan.
  void OnConnectionReady() { unsent_backoff_.Succeeded(); }
  // The dead-letter stream's connection (two-step) is (back) up, perhaps to another master: its
  // replicas are asked again, and writes that could not be sent go in its next plan.
  void OnDeadLetterConnectionReady();

  // The plan to send now, or nullopt: nothing due, or a plan is in flight (at most one). Takes
  // the retries due from the ledger (not while draining) and, when due, the keepalive of every
  // entry the ledger holds but is acknowledging (every claim.min_idle / 3).
  std::optional<SettlePlan> TakeDue(SteadyTime now);
  // The result of the plan in flight: ledger transitions, metrics, log lines, backoffs.
  void Apply(const SettlePlan& plan, const redis::BatchResult& result, SteadyTime now);
  // Two-step (2): the plan to send on the dead-letter stream's connection now, or nullopt
  // (nothing to write or confirm, or one in flight: at most one). Its timeout is the command
  // timeout plus kReplicaWait. `map_replicas`: the live replicas the cluster map lists for the
  // dead-letter stream's master now (nullopt: unknown), as in ApplyDeadLetterWrites.
  std::optional<SettlePlan> TakeDeadLetterWrites(SteadyTime now, std::optional<int> map_replicas);
  // When a write or a WAIT for letters held unconfirmed is due on the dead-letter stream's
  // connection, or nullopt for none queued or a plan in flight. Arm a timer only while that
  // connection is up (its readiness rewrites held letters and kicks the writes): one armed while
  // it is down would fire at a plan that cannot be sent, and spin. Not part of NextDue for that
  // reason.
  std::optional<SteadyTime> DeadLetterWritesDueAt() const;
  void ApplyDeadLetterWrites(const SettlePlan& plan, const redis::BatchResult& result,
                             SteadyTime now, std::optional<int> map_replicas);
  // True once after ROLE or WAIT said the dead-letter stream's node is no master any more: the
  // loop has its connection follow the slot to the new master.
  bool TakeDeadLetterMasterDemoted() { return std::exchange(dlq_master_demoted_, false); }
  // When TakeDue may return a plan next (the loop's timer), `now` at the earliest. The keepalive
  // is always scheduled; the early flush of lingering acks depends on the ledger, so ask again
  // after the ledger changed. nullopt while a plan is in flight (ask again after Apply).
  std::optional<SteadyTime> NextDue(SteadyTime now) const;
  // Nothing queued (acknowledgements, dead letters) and no plan in flight.
  bool Idle() const;
  bool in_flight() const { return in_flight_; }
  bool dead_letter_writes_in_flight() const { return dlq_in_flight_; }
  size_t queued_acks() const { return acks_.size() + gone_acks_.size(); }
  size_t queued_dead_letters() const {
    return dead_.size() + dead_writes_.size() + dead_unconfirmed_.size();
  }
  // True once after an ambiguous result released entries: the intake reads this consumer's
  // pending list again.
  bool TakeRecoveryRequest() { return std::exchange(recovery_requested_, false); }
  // True once after a step was refused with NOGROUP: the intake re-creates the group (SPEC 4.2).
  bool TakeGroupMissing() { return std::exchange(group_missing_, false); }

  // Shutdown, past the drain deadline: says what stays pending unsettled (nothing when Idle()).
  void LogUnsettled() const;
  // Shutdown: take back the delivery count of the entries read but never POSTed (nullopt when
  // there are none), and log what came of it.
  std::optional<SettlePlan> UndoPlan();
  void ApplyUndo(const SettlePlan& plan, const redis::BatchResult& result);

  Millis keepalive_interval() const { return keepalive_interval_; }

 private:
  struct QueuedDeadLetter {
    std::string id;
    redis::DeadLetterMeta meta;
  };

  bool AcksDue(SteadyTime now) const;
  // When the queued acknowledgements are due (ignoring the backoffs); nullopt for none queued.
  std::optional<SteadyTime> AcksDueAt() const;
  void ApplyAcks(const SettleResult& result, bool sent, bool loaded, SteadyTime now);
  void ApplyDeadLetters(const SettleResult& result, bool sent, bool loaded, SteadyTime now);
  void ApplyRetryClaims(const SettleResult& result, bool sent, bool loaded, SteadyTime now);
  void ApplyKeepAlive(const SettleResult& result, bool sent, bool loaded, SteadyTime now);
  void ApplyAmbiguous(const SettleResult& result);
  void LogDeadLetterRefused(const DeadLetterItem& item);
  // What the ROLE and WAIT answers of a dead-letter write plan say of what it wrote and of every
  // letter held unconfirmed: a replica has them (or none is listed to: confirmed), not yet
  // (held), or the node was demoted under the connection (written again).
  enum class Confirmation { kConfirmed, kHeld, kWriteAgain };
  Confirmation ApplyReplicaReplies(const SettleResult& result, size_t written, bool asked_wait,
                                   std::optional<int> map_replicas, SteadyTime now);
  // Its steps (settlement_two_step.cc). ROLE's answer noted: true when the node is no master now.
  bool NoteRole(const SettleResult& result);
  // What WAIT's answer settles (asked): confirmed, held, or nullopt when it said no replica.
  std::optional<Confirmation> ConfirmationByWait(const SettleResult& result, size_t waiting,
                                                 SteadyTime now);
  // No replica confirmed: by what the map and ROLE list, held or confirmed without one.
  Confirmation WithoutAReplicasWord(size_t waiting, bool asked_wait,
                                    std::optional<int> map_replicas, SteadyTime now);
  // Whether a replica of the dead-letter stream's master is listed, by the cluster map
  // (`map_replicas`: for the node the connection is on) or the last ROLE: some, none (the map
  // lists none and ROLE none connected), or unknown (the map cannot say for this node).
  enum class ReplicasListed { kSome, kNone, kUnknown };
  ReplicasListed ListedReplicas(std::optional<int> map_replicas) const;
  // Nothing can confirm the letters: acknowledged, logged with `why` when any were waiting.
  Confirmation ConfirmedWithoutReplica(std::string_view why, size_t waiting);
  // Letters stay held: logged when they start to be and every kHeldWarnEvery after.
  Confirmation Held(size_t waiting, std::optional<int> map_replicas, SteadyTime now);
  // Every held letter back to be written (kDeadLettering), logged with `why`.
  void WriteHeldAgain(std::string_view why);
  void CountFailure(SettleClass c, size_t n);
  void Requeue(std::vector<std::string> ids, std::vector<std::string>* queue);

  const config::Subscription& sub_;
  const redis::SubscriptionOps& ops_;
  EntryLedger* ledger_;
  ProgressReport* progress_ = nullptr;
  AttemptObserver* observer_;
  const Clock& clock_;
  const redis::DeadLetterTarget dlq_;
  // The lease keepalive's period (SPEC 3.2: well inside claim.min_idle), computed once.
  const Millis keepalive_interval_;
  redis::AckMode ack_mode_ = redis::AckMode::kAckOnly;
  Millis ack_linger_{0};

  std::vector<std::string> acks_;         // delivered
  std::vector<std::string> gone_acks_;    // payload gone
  std::optional<SteadyTime> acks_since_;  // when the oldest queued acknowledgement was queued
  std::vector<QueuedDeadLetter> dead_;
  // Two-step: checked (still ours), to XADD on the dead-letter stream's connection.
  std::vector<QueuedDeadLetter> dead_writes_;
  // Two-step: written (kDeadLetterWritten) on the current dead-letter connection, but no replica
  // has confirmed them yet while the master has one: not acknowledged until one does.
  std::vector<QueuedDeadLetter> dead_unconfirmed_;
  StepBackoff confirm_backoff_;
  bool two_step_ = false;
  bool cluster_map_ = false;
  bool dlq_in_flight_ = false;
  // After a write plan that never reached Redis: nothing is sent until its connection is back.
  StepBackoff dlq_unsent_backoff_;
  // The replicas connected to the dead-letter stream's master (the last ROLE), unknown until
  // answered; ROLE refused (an ACL without @admin): not asked again on this connection.
  std::optional<int> dlq_replicas_;
  bool dlq_role_refused_ = false;
  bool dlq_master_demoted_ = false;
  // When the last warning that letters are held was logged; nullopt while none are held.
  std::optional<SteadyTime> held_warned_at_;

  StepBackoff ack_backoff_, dead_backoff_, claim_backoff_, keepalive_backoff_;
  // After a plan that never reached Redis: nothing is sent until the connection is back.
  StepBackoff unsent_backoff_;
  SteadyTime next_keepalive_;
  bool load_scripts_ = false;
  bool in_flight_ = false;
  bool draining_ = false;
  bool recovery_requested_ = false;
  bool group_missing_ = false;
};

}  // namespace streamcar::runtime
