#pragma once
// The settler of one subscription: the thread that owns the subscription's second Redis
// connection and performs every write the engine makes: batched, pipelined acknowledgements;
// dead letters (a script: XADD, then XACK only if it succeeded); retry claims (an owner-checked
// XCLAIM to itself, which counts the delivery); the owner-checked lease keepalive (every
// claim.min_idle / 3); the XAUTOCLAIM beat that recovers dead peers' entries; the pending/lag
// gauges; and, at shutdown, taking back the delivery count of entries read but never POSTed.
//
// Every failed settlement is classed (SettleFailure) and counted, and acted on by class.
//
// Workers and the reader hand it outcomes through Submit*/Direct* (thread-safe); everything else
// runs on its own thread. Work that Redis could not take (an outage) is kept and retried after the
// reconnect: an outcome is never dropped.

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/common/clock.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/config/config.h"
#include "sidecar/consumer/dispatcher.h"
#include "sidecar/delivery/outcome.h"
#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/gauges.h"

namespace streamcar::consumer {

using redis::AckMode;

// How a settlement failed (SPEC 4.3); the runtime acts on the class.
enum class SettleFailure {
  kLostLease,  // the entry is no longer this consumer's: drop it
  kDefinite,   // Redis answered with an error: retry the step while the entry stays held
  kAmbiguous,  // sent, then the connection failed or timed out: release the entry
};

struct Outcome {
  HeldEntry* entry = nullptr;
  delivery::Decision decision;
};

class Settler {
 public:
  Settler(const config::Subscription& subscription, redis::StreamOps ops,
          std::unique_ptr<redis::Session> session, Dispatcher* dispatcher,
          admin::SubscriptionMetrics* metrics, admin::Watchdog::Loop* loop,
          std::function<void(Status)> on_fatal);
  ~Settler();

  void Start();
  // Set by the reader once it knows what the server supports (before any outcome exists).
  void SetAckMode(AckMode mode) { ack_mode_ = mode; }
  // After the own-PEL drain: the XAUTOCLAIM beat may start.
  void EnableAutoClaim();

  // Thread-safe inputs.
  // Entries the handler accepted: the worker already released them (their room is free at once);
  // only their ids are acknowledged, in the next batched XACK.
  void SubmitAcks(std::vector<std::string> ids);
  // Outcomes that need the entry itself: retries and dead letters.
  void Submit(std::vector<Outcome> outcomes);
  // An entry that is not held (never admitted): acknowledge it (payload gone) ...
  void DirectAckDeleted(std::vector<std::string> ids);
  // Whether an entry read or claimed with this many deliveries crashed a consumer each time
  // (attempts > max_attempts) and must be dead-lettered without another delivery ...
  bool ExhaustedOnArrival(const StreamEntry& entry) const;
  // ... which this does (reason max_attempts), for an entry that is not held.
  void DeadLetterExhausted(StreamEntry entry);

  // Shutdown, stage 1: no retry claim and no reclaim from now on (SPEC 3.2); outcomes are still
  // settled.
  void BeginDraining();
  // Shutdown, stage 2: settle what is pending (until `deadline`), take back the delivery count of
  // entries never POSTed, then end the thread.
  void FinishAndJoin(SteadyTime deadline);

  // Whether `id` waits here to be acknowledged or dead-lettered although no entry is held for
  // it: a recovery of the own pending list must not deliver it again.
  bool Settling(const std::string& id) const;
  // True once after a settlement was ambiguous: entries were released that may still be pending,
  // and this consumer's pending list should be read again (the reader does).
  bool TakeRecoveryRequest() { return recovery_requested_.exchange(false); }

 private:
  struct DeadJob {
    HeldEntry* held = nullptr;  // nullptr for a direct job
    StreamEntry direct_entry;
    delivery::DeadLetterReason reason = delivery::DeadLetterReason::kMaxAttempts;
    redis::DeadLetterMeta meta;  // meta.reason = Name(reason)
    const StreamEntry& entry() const { return held ? held->entry : direct_entry; }
  };

  // A step that failed with an error reply is tried again after a capped, jittered delay.
  struct Backoff {
    int streak = 0;
    SteadyTime retry_at{};
    bool Due(SteadyTime now) const { return now >= retry_at; }
    void Failed(SteadyTime now);
    void Succeeded() { streak = 0; }
  };
  // Where the commands of one pipeline section sit, and which ids each carries.
  struct AckChunk {
    size_t begin = 0, end = 0;  // [begin, end) in the pipeline
    std::vector<std::string> ids;
    bool delivered = false;  // acknowledgements of delivered entries (not of deleted ones)
  };

  static DeadJob ExhaustedJob(StreamEntry entry);
  void Run();
  void TakeInputs(SteadyTime now);
  // One pipeline with everything due; false when Redis could not take it.
  bool Flush(SteadyTime now);
  // The acknowledgement of `ids` in the subscription's AckMode.
  void AppendAckCommands(const std::vector<std::string>& ids, bool delivered,
                         std::vector<redis::Command>* out, std::vector<AckChunk>* chunks) const;
  // The pipeline failed after it was sent: what it carried may or may not have been applied.
  void SettleAmbiguous(const std::vector<AckChunk>& acks, size_t dead_sent, size_t claims_sent,
                       const std::string& error);
  void ApplyAcks(const std::vector<redis::Reply>& replies, const std::vector<AckChunk>& chunks,
                 SteadyTime now);
  void ApplyDeadLetters(const std::vector<redis::Reply>& replies, size_t begin, size_t count,
                        SteadyTime now);
  void ApplyRetryClaims(const std::vector<redis::Reply>& replies, size_t begin,
                        const std::vector<std::vector<HeldEntry*>>& chunks, SteadyTime now);
  void ApplyKeepAlive(const std::vector<redis::Reply>& replies, size_t begin, size_t end,
                      SteadyTime now);
  void CountFailure(SettleFailure failure, size_t n = 1);
  void Release(HeldEntry* entry);
  void ForgetSettling(const std::vector<std::string>& ids);
  // Shutdown: entries read but never POSTed get the delivery their read counted taken back.
  void UndoUnpostedReads();
  void RunAutoClaim();
  // The pending/lag gauges, when due (runtime::Gauges on this thread's session).
  void RefreshGauges(SteadyTime now);
  SteadyTime NextWake(SteadyTime now) const;
  bool HasDueWork(SteadyTime now) const;

  const config::Subscription& sub_;
  redis::StreamOps ops_;
  std::unique_ptr<redis::Session> session_;
  Dispatcher* dispatcher_;
  admin::SubscriptionMetrics* metrics_;
  admin::Watchdog::Loop* loop_;
  std::function<void(Status)> on_fatal_;
  delivery::OutcomePolicy policy_;
  std::atomic<AckMode> ack_mode_{AckMode::kAckOnly};
  runtime::Gauges gauges_;

  // Inputs, guarded by mutex_.
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Outcome> inbox_;
  std::vector<std::string> inbox_acks_;
  std::vector<std::string> inbox_direct_acks_;
  std::vector<DeadJob> inbox_direct_dead_;
  bool finishing_ = false;
  bool draining_ = false;
  SteadyTime finish_deadline_{};
  bool autoclaim_enabled_ = false;
  // Ids in acks_/inbox_acks_ and direct dead letters: see Settling().
  std::unordered_multiset<std::string> settling_ids_;
  std::atomic<bool> recovery_requested_{false};

  // Settler-thread state: work not yet confirmed by Redis.
  std::vector<std::string> acks_;  // ids of delivered entries
  std::vector<std::string> direct_acks_;
  std::vector<DeadJob> dead_;
  std::vector<HeldEntry*> claims_;
  Backoff ack_backoff_, dead_backoff_, claim_backoff_, keepalive_backoff_;
  uint64_t scripts_loaded_for_ = 0;
  Millis connect_retry_in_{0};  // the delay the session asked for after a failed connect  // the
                                // session generation the scripts were loaded on
  SteadyTime next_keepalive_{};
  SteadyTime next_autoclaim_{};
  std::string autoclaim_cursor_ = "0-0";
  std::thread thread_;
};

}  // namespace streamcar::consumer
