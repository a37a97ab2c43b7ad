#pragma once
// The reading half of one plain subscription, on the subscription's event loop: it ensures the
// consumer group (and checks what retrying cannot fix), drains this consumer's own pending list
// from 0 with an advancing cursor (a restarted consumer recovers its own entries first, SPEC
// 3.2), then reads new entries ('>', BLOCK), never asking for more than the ledger has room for.
// After the drain it also runs the reclaim beat (XAUTOCLAIM of entries idle longer than
// claim.min_idle: a dead peer's, SPEC 3.2) and, after a lost read connection or an ambiguous
// settlement, re-reads the own pending list for entries nothing here holds (SPEC 4.3).
// Everything it brings in goes through Intake::Route into the ledger.
//
// Connections. Everything that brings entries in runs on the READ connection, one step at a
// time: the setup, the drain, the '>' reads, the recovery re-read and the reclaim beat's claims
// (a beat that falls due during a BLOCK read runs when that read returns, within kBlock). So
// no two steps ever count on the same room, and "never more than there is room for" (SPEC 4.2)
// is exact. This class sets the read connection's OnReady and OnFatal. The COMMAND connection
// (the owner's, shared with the settlement) carries only the CLIENT UNBLOCK that ends a BLOCK read
// at shutdown.
//
// When it reads. A step starts when the read connection is ready, nothing else is outstanding on
// it, and the ledger says so: ReadRoom() > 0, WorthReading() and !ReadPaused(now). Otherwise it
// waits for Poke() (room freed, the handler answered or became healthy again). A refusal pause
// that ends by itself (EntryLedger::PauseEndsAt) is waited out on a loop timer, so a pause ending
// needs no Poke; a health pause or a handler still down does.
//
// Threads: loop thread only. Time comes from the loop's clock. Callbacks run on the loop and
// never inside the call that caused them to be due (Stop's `stopped` included).

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/admin/metrics.h"
#include "sidecar/common/clock.h"
#include "sidecar/common/event_loop.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/redis/async_connection.h"
#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/consumer_reaper.h"
#include "sidecar/runtime/entry_ledger.h"
#include "sidecar/runtime/intake.h"
#include "sidecar/sharding/fenced_ops.h"

namespace streamcar::runtime {

class PlainIntake {
 public:
  struct Callbacks {
    // Once, after the group exists and the setup checks passed (readiness).
    std::function<void()> group_ready;
    // Retrying cannot fix it: the process exits 1 (the stream or the dead-letter key of another
    // type, ack.delete with other groups and no XACKDEL, authentication refused ...). Nothing is
    // read after it.
    std::function<void(const Status&)> fatal;
    // Once, before any entry is admitted: how acknowledged entries leave the stream.
    std::function<void(redis::AckMode)> ack_mode;
    // Entries were routed into the ledger (for delivery, or only to be acknowledged or
    // dead-lettered): the loop delivers and settles them.
    std::function<void()> admitted;
    // Sharded only (UseFencedReads): the shard's fence refused a step (FENCED or STALE: another
    // member holds a newer token). Nothing is read after it; once, with the installed token.
    // `op`: the step refused (install, claim or read: SHARDING.md C1's streamcar_fenced_ops_total).
    std::function<void(int64_t installed, std::string_view op)> fenced;
    // Once, when the start-up drain of the own pending list has ended (sharded: the takeover,
    // which claimed the shard's whole pending list, is done: SHARDING.md B7's STARTING -> ACTIVE).
    std::function<void()> drained;
  };

  // How long one XREADGROUP '>' waits for new entries.
  static constexpr Millis kBlock{1000};
  // Upper bound of one read's COUNT, even when there is more room.
  static constexpr size_t kMaxReadCount = 1000;
  // Sharded: how long a takeover waits for a replica to have the fence it installed (at most
  // half the command timeout).
  static constexpr Millis kFenceReplicaWait{1000};
  // Pending ids listed per XPENDING page of the recovery re-read.
  static constexpr int kRecoveryPage = 1000;

  // Everything passed in outlives this object. `metrics` may be null; the counting is Intake's
  // (claimed, deleted): it is accepted so every runtime part is built from the same set.
  PlainIntake(EventLoop& loop, const config::Subscription& sub, const redis::SubscriptionOps& ops,
              redis::AsyncConnection* read, redis::AsyncConnection* command, EntryLedger* ledger,
              Intake* intake, admin::SubscriptionMetrics* metrics, Callbacks callbacks);
  ~PlainIntake();
  PlainIntake(const PlainIntake&) = delete;
  PlainIntake& operator=(const PlainIntake&) = delete;

  // After a '>' read that brought entries but fewer than it asked for, the next one waits until
  // `linger` has passed since it returned, so that it brings several entries at once (fewer
  // wake-ups at moderate rates, up to `linger` more latency; runtime/tuning.h). 0: read at once.
  // A read that brought nothing (the stream is idle) or all it asked for never lingers.
  void SetReadLinger(Millis linger) { read_linger_ = linger; }
  // The dead-letter key is in another slot of a cluster (the two-step path): its type was
  // checked at start on its own node, so setup does not ask this connection's node.
  void SkipDeadLetterTypeCheck() { skip_dead_letter_type_ = true; }
  // One shard of a sharded subscription (SHARDING.md B5), `fenced` being the `ops` given above:
  // the start-up drain of the own pending list is the takeover (it claims every pending entry of
  // the shard, in id order, before anything new); a '>' read never blocks, and one that finds
  // nothing is followed by a wait (XREAD BLOCK after the shard's last id) that changes nothing;
  // there is no reclaim beat; a step the fence refuses ends the intake (Callbacks::fenced).
  void UseFencedReads(const sharding::FencedShardOps* fenced) { fenced_ = fenced; }
  // Consumer reaping (SPEC 4.6): the reclaim beat also runs a pass of `reaper` when it is due,
  // as a step of its own on the read connection after the beat's claims. No outcome of a pass
  // ends the intake (an ACL refusal turns reaping off, runtime/consumer_reaper.h). Plain
  // subscriptions only.
  void UseReaper(ConsumerReaper* reaper) { reaper_ = reaper; }

  // Setup (group, dead-letter key type, ack mode), then the own-PEL drain, then '>' reads; the
  // reclaim beat (every claim.interval) only once the drain is done. Waits for the read
  // connection when it is not ready yet.
  void Start();
  // Room freed, a pause began or ended, the handler answered: reads now if it may (see above).
  // When reading is paused now and a BLOCK read waits, that read is ended (CLIENT UNBLOCK), so
  // nothing arrives that could not be delivered.
  void Poke();
  // An ambiguous settlement: re-reads the own pending list for entries nothing here holds (after
  // the drain, which reads them all anyway; between two reads, never during one).
  void RequestRecovery();
  // The settlement met NOGROUP (the stream was deleted or evicted with its group): re-create the
  // group at 0 before the next read, even when there is no room to read (SPEC 4.3 -> 4.2).
  void RequestGroupRecreation();
  // Shutdown stage 1: no new read, no reclaim. A BLOCK read in progress is ended with CLIENT
  // UNBLOCK <its client id> sent on the command connection (when the id is unknown or UNBLOCK is
  // refused, its reply is awaited: at most kBlock + the command timeout). `stopped` runs once
  // nothing is outstanding and what the last read or claim brought has been routed.
  void Stop(std::function<void()> stopped);

  // The start-up drain of the own pending list is done.
  bool drained() const { return drained_; }
  // A step is outstanding on the read connection (a read, a drain page, a claim, a setup step).
  bool reading() const { return read_busy_; }
  // The stop is complete (`stopped` has been posted).
  bool stopped() const { return phase_ == Phase::kStopped; }

 private:
  enum class Phase { kIdle, kSetup, kDrain, kReading, kStopped, kFailed };
  // kFenceReplicated: sharded only, after the install (ReplicateFence).
  enum class SetupStep { kEnsureGroup, kFenceReplicated, kDeadLetterType, kAckDel, kGroupCount };

  // Wraps a callback so that it does nothing once this object is gone.
  template <typename F>
  auto Guard(F f);
  // One command on a connection; the reply as it came (an error reply stays a reply), or the
  // failure when no reply came.
  void SendRaw(redis::AsyncConnection* connection, redis::Command command,
               std::function<void(StatusOr<redis::Reply>)> done);

  // Starts the next step on the read connection if it may.
  void Pump();
  // How many entries a read may ask for now: 0 while paused, not worth it, or out of room.
  size_t ReadCount();
  void ArmPauseTimer(SteadyTime now);

  void SetupNext();
  // Sharded: WAIT 1 after the fence's install when the shard's master has a replica (B5.1).
  void ReplicateFence();
  void SetupFailed(const Status& status);
  void SetupDone(redis::AckMode mode);

  void DrainNext();
  void DrainDone();

  void ReadNext();
  void OnReadNew(StatusOr<redis::Reply> reply);
  // What a '>' read brought (plain or fenced): the linger, the routing, the next step.
  void RouteNew(std::vector<StreamEntry> entries);
  // Sharded: the fenced '>' read (the fence watched and checked, then the watched transaction),
  // and the wait after one that found nothing.
  void ReadShardNext(size_t count);
  void OnFenceChecked(size_t count, uint64_t watched_on, redis::BatchResult watched);
  void ReadWatched(size_t count);
  void WaitForNew(const std::string& tail_id);
  // Sharded: true when `status` is the fence's refusal, which then ended the intake.
  bool EndIfFenced(const Status& status, std::string_view op);
  // The server answered NOSCRIPT to a step sent on the read connection (a sharded
  // subscription's install, takeover and reads are scripts): it forgot them (SCRIPT FLUSH, a
  // restart after the connection loaded them). Loads them again, then the step runs again.
  void ReloadScripts();

  void RecoverNext();
  void RecoverKeepAlive(std::vector<std::string> ids, bool reloaded);
  void RecoverFetch(std::vector<std::string> ids);
  // Ends the current page of the recovery: the next page, or the end.
  void RecoverPageDone();
  void RecoverFailed(const Status& status);
  void RecoverDone();

  // Handles a failed step of the read connection as the old reader's Recover did: NOGROUP
  // re-creates the group at 0, WRONGTYPE is fatal, another error reply waits a second, a lost
  // connection waits for the reconnect (then re-reads the own pending list once drained).
  void ReadFailed(const Status& status);
  void RecreateGroup();
  void OnReadConnectionReady();
  void Fatal(const Status& status);

  void ReclaimBeat();
  void ReclaimNext();
  void ReclaimFailed(const Status& status, bool claimed);
  void ReclaimRoute(redis::AutoClaimReply claimed);
  void ReclaimEnd();
  // A reaping pass on the read connection (reap_due_: the beat found one due).
  void ReapNext();

  // Routes what a step brought; tells the loop when anything was routed.
  void Route(std::vector<StreamEntry> entries, IntakeSource source);
  void Unblock();
  void MaybeFinishStop();

  EventLoop& loop_;
  const config::Subscription& sub_;
  const redis::SubscriptionOps& ops_;
  redis::AsyncConnection* read_;
  redis::AsyncConnection* command_;
  EntryLedger* ledger_;
  Intake* intake_;
  Callbacks callbacks_;

  Phase phase_ = Phase::kIdle;
  bool stopping_ = false;
  std::function<void()> stopped_;

  // The read connection: one step at a time.
  bool read_busy_ = false;
  bool block_read_ = false;        // the step outstanding is a BLOCK read ('>')
  bool unblocking_ = false;        // CLIENT UNBLOCK was sent for it
  uint64_t block_generation_ = 0;  // the read connection's generation when it was sent
  std::unique_ptr<EventLoop::Timer> backoff_timer_;  // a step waits before it is tried again
  std::unique_ptr<EventLoop::Timer> pause_timer_;    // the refusal pause ends
  std::unique_ptr<EventLoop::Timer> unblock_timer_;  // UNBLOCK again: it came before the read
  std::unique_ptr<EventLoop::Timer> linger_timer_;   // the read linger ends

  bool skip_dead_letter_type_ = false;
  const sharding::FencedShardOps* fenced_ = nullptr;
  Millis read_linger_{0};
  size_t read_asked_ = 0;                      // the COUNT of the '>' read outstanding
  std::optional<SteadyTime> lingering_until_;  // no '>' read before this
  std::optional<SteadyTime> reloaded_at_;      // the last ReloadScripts: a second soon after waits

  SetupStep setup_step_ = SetupStep::kEnsureGroup;
  uint64_t installed_on_ = 0;  // sharded: the read connection's generation at the fence install
  int setup_failures_ = 0;
  int nogroup_failures_ = 0;    // consecutive failed group re-creations: their backoff step
  bool group_missing_ = false;  // RequestGroupRecreation: re-create before the next step

  std::string drain_cursor_ = "0";
  size_t drained_count_ = 0;
  bool drained_ = false;

  bool recovery_requested_ = false;
  bool recovering_ = false;
  std::string recover_start_ = "-";
  bool recover_last_page_ = false;
  std::map<std::string, int> recover_counts_;  // delivery counts of the page's ids (XPENDING)
  size_t recovered_ = 0;
  uint64_t recover_kept_up_to_ = 0;  // the ledger's kept_sequence() when this re-read began

  std::unique_ptr<EventLoop::Timer> reclaim_timer_;
  bool reclaim_due_ = false;  // a beat is due or under way (its steps between reads)
  std::string reclaim_cursor_ = "0-0";
  ConsumerReaper* reaper_ = nullptr;
  bool reap_due_ = false;  // the beat found a reaping pass due: it runs after the claims

  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace streamcar::runtime
