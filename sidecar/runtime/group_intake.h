#pragma once
// What every entry source that reads as one consumer of a group shares (runtime/entry_source.h):
// it ensures the consumer group (and checks what retrying cannot fix), drains this consumer's own
// pending list from 0 with an advancing cursor (a restarted consumer recovers its own entries
// first, SPEC 3.2), then reads new entries, never asking for more than the ledger has room for;
// after a lost read connection or an ambiguous settlement it re-reads the own pending list for
// entries nothing here holds (runtime/pending_recovery.h). A NOGROUP re-creates the group at 0.
// PlainIntake adds the reclaim beat; sharding::FencedIntake reads behind a shard's fence. What
// they differ in are the hooks below; a step the stream's owner refuses
// (SubscriptionOps::RefusedOwnership) ends the intake (Callbacks::refused) whichever it is.
//
// Connections. Everything that brings entries in runs on the READ connection, one step at a
// time: the setup, the drain, the reads of new entries, the recovery re-read and a source's own
// steps (a step that falls due during a BLOCK read runs when that read returns, within kBlock).
// So no two steps ever count on the same room, and "never more than there is room for" (SPEC
// 4.2) is exact. This class sets the read connection's OnReady and OnFatal. The COMMAND
// connection (the owner's, shared with the settlement) carries only the CLIENT UNBLOCK that ends
// a BLOCK read at shutdown.
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
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/event_loop.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/redis/async_connection.h"
#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/cadences.h"
#include "sidecar/runtime/entry_ledger.h"
#include "sidecar/runtime/entry_source.h"
#include "sidecar/runtime/intake.h"
#include "sidecar/runtime/ownership.h"
#include "sidecar/runtime/pending_recovery.h"

namespace streamcar::runtime {

class GroupIntake : public EntrySource, private PendingRecovery::Host {
 public:
  // How long one blocking read waits for new entries.
  static constexpr Millis kBlock = cadence::kReadBlock;

  ~GroupIntake() override;
  GroupIntake(const GroupIntake&) = delete;
  GroupIntake& operator=(const GroupIntake&) = delete;

  // EntrySource. Start: setup (group, the source's ConfirmGroup step, dead-letter key type, ack
  // mode), then the own-PEL drain, then new entries and the source's own steps. Stop: no new
  // step; a BLOCK read in progress is ended with CLIENT UNBLOCK <its client id> sent on the
  // command connection (when the id is unknown or UNBLOCK is refused, its reply is awaited: at
  // most kBlock + the command timeout).
  void Start() final;
  void Poke() final;
  void RequestRecovery() final;
  void RequestGroupRecreation() final;
  void Stop(std::function<void()> stopped) final;
  // After a read of new entries that brought entries but fewer than it asked for, the next one
  // waits until `linger` has passed since it returned, so that it brings several entries at once
  // (fewer wake-ups at moderate rates, up to `linger` more latency). A read that brought nothing
  // (the stream is idle) or all it asked for never lingers.
  void SetReadLinger(Millis linger) final { read_linger_ = linger; }
  void SkipDeadLetterTypeCheck() final { skip_dead_letter_type_ = true; }

  // The start-up drain of the own pending list is done.
  bool drained() const { return drained_; }
  // A step is outstanding on the read connection (a read, a drain page, a claim, a setup step).
  bool reading() const { return read_busy_; }
  // The stop is complete (`stopped` has been posted).
  bool stopped() const { return phase_ == Phase::kStopped; }

 protected:
  // An error reply other than NOGROUP/WRONGTYPE on the read connection: wait this long before the
  // next step rather than spin.
  static constexpr Millis kServerErrorPause{1000};
  // After a read a cluster redirected (MOVED, ASK) or released (UNBLOCKED: the key migrated, or
  // the node changed role): the connection is following the slot already. CLUSTERDOWN lasts as
  // long as the cluster needs to fail over: it keeps the ordinary pause.
  static constexpr Millis kRoutingPause{50};

  // `parts.metrics` and `parts.reaper` are not used here.
  explicit GroupIntake(const SourceParts& parts);

  // --- what a source adds ---
  // The setup step after the group exists, before the dead-letter key's check: ends with
  // SetupContinue (or SetupRestart, SetupFailed). Plain: nothing to do.
  virtual void ConfirmGroup() { SetupContinue(); }
  // Reads new entries, at most `count` (> 0): the read connection is free and ready. Ends with
  // RouteNew, ReadFailed or (nothing read) EndStep.
  virtual void ReadNew(size_t count) = 0;
  // Between two reads, after the recovery: starts a step of the source's own and returns true,
  // or returns false (then new entries are read).
  virtual bool OwnStep() { return false; }
  // The start-up drain just ended.
  virtual void OnDrained() {}
  // The intake ends (stopping: Stop; else it failed or was refused): cancel the source's timers.
  virtual void EndOwnSteps(bool /*stopping*/) {}

  // --- what a source's steps use ---
  // Wraps a callback so that it does nothing once this object is gone.
  template <typename F>
  auto Guard(F f) {
    return [alive = std::weak_ptr<bool>(alive_), f = std::move(f)](auto&&... args) mutable {
      if (alive.expired()) return;
      f(std::forward<decltype(args)>(args)...);
    };
  }
  // Starts the next step on the read connection if it may.
  void Pump();
  // The step outstanding ended with nothing to route: the next one.
  void EndStep();
  // How many entries a read may ask for now: 0 while paused, not worth it, or out of room.
  size_t ReadCount() override;
  // ConfirmGroup's ends: on to the dead-letter check; from the group again; a failed step.
  void SetupContinue();
  void SetupRestart();
  void SetupFailed(const Status& status);
  // What a read of new entries brought (read_asked_ asked for): the linger, the routing, the
  // next step.
  void RouteNew(std::vector<StreamEntry> entries);
  // Routes what a step brought; tells the loop when anything was routed.
  void Route(std::vector<StreamEntry> entries, IntakeSource source) override;
  // Handles a failed step of the read connection: a refusal of the owner ends the intake,
  // NOSCRIPT loads the scripts again, NOGROUP re-creates the group at 0, WRONGTYPE and ACL
  // refusals are fatal, another error reply waits a second, a lost connection waits for the
  // reconnect (then re-reads the own pending list once drained).
  void ReadFailed(const Status& status);
  // True when `status` is the owner's refusal of step `op`, which then ended the intake.
  bool EndIfRefused(const Status& status, std::string_view op);
  void MaybeFinishStop();
  // A blocking read goes out now (Poke and Stop may end it with CLIENT UNBLOCK); it came back.
  void BeginBlockingRead();
  void EndBlockingRead();
  // The next step waits `pause` (a backoff, a routing pause).
  void PauseSteps(Millis pause);
  // The read connection's generation when the group was last ensured.
  uint64_t group_ensured_on() const { return group_ensured_on_; }
  bool stopping() const { return stopping_; }
  bool past_drain() const { return phase_ == Phase::kReading; }
  void WantRecovery() { recovery_.Request(); }

  EventLoop& loop_;
  const config::Subscription& sub_;
  const redis::SubscriptionOps& ops_;
  redis::AsyncConnection* read_;
  EntryLedger* ledger_;
  bool read_busy_ = false;  // the read connection: one step at a time
  size_t read_asked_ = 0;   // the COUNT of the read of new entries outstanding

 private:
  enum class Phase { kIdle, kSetup, kDrain, kReading, kStopped, kFailed };
  enum class SetupStep { kEnsureGroup, kConfirmGroup, kDeadLetterType, kAckDel, kGroupCount };

  void ArmPauseTimer(SteadyTime now);

  void SetupNext();
  void EnsureGroup();
  void CheckDeadLetterType();
  void CheckAckDel();
  void CountGroups();
  void SetupDone(redis::AckMode mode);

  void DrainNext();
  void DrainDone();
  void ReadNext();

  // PendingRecovery::Host.
  void StepEnded() override { EndStep(); }
  void RecoveryFailed(const Status& status) override;

  // The server answered NOSCRIPT to a step sent on the read connection (a shard's install,
  // takeover and reads are scripts): it forgot them (SCRIPT FLUSH, a restart after the
  // connection loaded them). Loads them again, then the step runs again.
  void ReloadScripts();
  void RecreateGroup();
  void OnReadConnectionReady();
  void Fatal(const Status& status);
  void EndTimers();
  void Unblock();

  redis::AsyncConnection* command_;
  Intake* router_;
  Callbacks callbacks_;
  PendingRecovery recovery_;

  Phase phase_ = Phase::kIdle;
  bool stopping_ = false;
  std::function<void()> stopped_;

  bool block_read_ = false;        // the step outstanding is a BLOCK read
  bool unblocking_ = false;        // CLIENT UNBLOCK was sent for it
  uint64_t block_generation_ = 0;  // the read connection's generation when it was sent
  std::unique_ptr<EventLoop::Timer> backoff_timer_;  // a step waits before it is tried again
  std::unique_ptr<EventLoop::Timer> pause_timer_;    // the refusal pause ends
  // UNBLOCK again: it came before the read, or the command connection was not ready.
  std::unique_ptr<EventLoop::Timer> unblock_timer_;
  std::unique_ptr<EventLoop::Timer> linger_timer_;  // the read linger ends

  bool skip_dead_letter_type_ = false;
  Millis read_linger_{0};
  std::optional<SteadyTime> lingering_until_;  // no read of new entries before this
  std::optional<SteadyTime> reloaded_at_;      // the last ReloadScripts: a second soon after waits

  SetupStep setup_step_ = SetupStep::kEnsureGroup;
  uint64_t group_ensured_on_ = 0;
  int setup_failures_ = 0;
  int nogroup_failures_ = 0;    // consecutive failed group re-creations: their backoff step
  bool group_missing_ = false;  // RequestGroupRecreation: re-create before the next step

  std::string drain_cursor_ = "0";
  size_t drained_count_ = 0;
  bool drained_ = false;

  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace streamcar::runtime
