#pragma once
// The settler of one subscription: the thread that owns the subscription's second Redis
// connection and performs every write the engine makes: batched, pipelined acknowledgements;
// dead letters (XADD + XACK in one MULTI/EXEC); retry claims (XCLAIM to itself, which counts the
// delivery); the lease keepalive (XCLAIM ... JUSTID every claim.min_idle / 3); the XAUTOCLAIM beat
// that recovers dead peers' entries; and the pending/lag gauges.
//
// Workers and the reader hand it outcomes through Submit*/Direct* (thread-safe); everything else
// runs on its own thread. Work that Redis could not take (an outage) is kept and retried after the
// reconnect: an outcome is never dropped.

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/common/clock.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/config/config.h"
#include "sidecar/consumer/dispatcher.h"
#include "sidecar/delivery/outcome.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::consumer {

// How acknowledged entries leave the stream (SPEC 4.3).
enum class AckMode { kAckOnly, kAckDel, kAckThenDelete };

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

  // Shutdown: stop retrying and claiming, settle what is pending (until `deadline`), then exit.
  void FinishAndJoin(SteadyTime deadline);

 private:
  struct DeadJob {
    HeldEntry* held = nullptr;  // nullptr for a direct job
    StreamEntry direct_entry;
    redis::DeadLetterMeta meta;
    const StreamEntry& entry() const { return held ? held->entry : direct_entry; }
  };

  static DeadJob ExhaustedJob(StreamEntry entry);
  void Run();
  void TakeInputs(SteadyTime now);
  // One pipeline with everything pending; false when Redis could not take it.
  bool Flush(SteadyTime now);
  // The acknowledgement of `ids` in the subscription's AckMode; `in_transaction` when the caller
  // already opened a MULTI (a dead letter's).
  void AppendAckCommands(const std::vector<std::string>& ids, std::vector<redis::Command>* out,
                         bool in_transaction = false) const;
  void RunAutoClaim();
  void RefreshGauges();
  SteadyTime NextWake(SteadyTime now) const;
  bool Reconnect();

  const config::Subscription& sub_;
  redis::StreamOps ops_;
  std::unique_ptr<redis::Session> session_;
  Dispatcher* dispatcher_;
  admin::SubscriptionMetrics* metrics_;
  admin::Watchdog::Loop* loop_;
  std::function<void(Status)> on_fatal_;
  delivery::OutcomePolicy policy_;
  std::atomic<AckMode> ack_mode_{AckMode::kAckOnly};

  // Inputs, guarded by mutex_.
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Outcome> inbox_;
  std::vector<std::string> inbox_acks_;
  std::vector<std::string> inbox_direct_acks_;
  std::vector<DeadJob> inbox_direct_dead_;
  bool finishing_ = false;
  SteadyTime finish_deadline_{};
  bool autoclaim_enabled_ = false;

  // Settler-thread state: work not yet confirmed by Redis.
  std::vector<std::string> acks_;  // ids of delivered entries
  std::vector<std::string> direct_acks_;
  std::vector<DeadJob> dead_;
  std::vector<HeldEntry*> claims_;
  SteadyTime next_keepalive_{};
  SteadyTime next_autoclaim_{};
  SteadyTime next_gauges_{};
  SteadyTime next_lag_count_{};
  std::string autoclaim_cursor_ = "0-0";
  StopSignal stop_;  // only for the reconnect backoff at the end of a failed shutdown flush
  std::thread thread_;
};

}  // namespace streamcar::consumer
