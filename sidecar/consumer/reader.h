#pragma once
// The reader of one subscription: owns the subscription's blocking Redis connection (a blocking
// read never shares its connection: DESIGN.md). It ensures the group, drains this consumer's own
// pending entries from 0 with an advancing cursor (recovers self), then reads new entries with
// '>' and BLOCK, never asking for more than the dispatcher has room for.

#include <functional>
#include <memory>
#include <thread>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/config/config.h"
#include "sidecar/consumer/dispatcher.h"
#include "sidecar/consumer/settler.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::consumer {

struct ReaderCallbacks {
  std::function<void()> group_ready;  // the group exists (readiness)
  std::function<void(Status)> fatal;  // retrying cannot fix it: exit 1
};

class Reader {
 public:
  Reader(const config::Subscription& subscription, redis::StreamOps ops,
         std::unique_ptr<redis::Session> session, Dispatcher* dispatcher, Settler* settler,
         admin::SubscriptionMetrics* metrics, admin::Watchdog::Loop* loop,
         ReaderCallbacks callbacks);
  ~Reader();

  void Start();
  // No new reads from now on; the thread ends within one BLOCK period (Join waits for it).
  void RequestStop() { stop_.Request(); }
  void Join();
  void StopAndJoin() {
    RequestStop();
    Join();
  }

  // How long one XREADGROUP waits for new entries.
  static constexpr Millis kBlock{1000};

 private:
  void Run();
  bool Setup();
  bool DrainOwnPending();
  // After a lost connection or an ambiguous settlement: entries pending for this consumer that
  // nothing here holds (a read whose reply was lost, an acknowledgement that may not have been
  // applied) are fetched without counting a delivery and delivered again (SPEC 4.3).
  void RecoverOwnPending();
  // Keeps in *ids only the entries still this consumer's, refreshing their idle time (the
  // owner-checked keepalive); returns how many were dropped.
  StatusOr<size_t> StillOwned(std::vector<std::string>* ids);
  void ReadNew();
  // Handles a failed read: reconnects, re-creates a lost group. False when the reader must end.
  bool Recover(const Status& status);
  // Entries from a read: deleted ones acknowledged, exhausted ones dead-lettered, the rest held.
  size_t Route(std::vector<StreamEntry> entries);

  const config::Subscription& sub_;
  redis::StreamOps ops_;
  std::unique_ptr<redis::Session> session_;
  Dispatcher* dispatcher_;
  Settler* settler_;
  admin::SubscriptionMetrics* metrics_;
  admin::Watchdog::Loop* loop_;
  ReaderCallbacks callbacks_;
  StopSignal stop_;
  int nogroup_failures_ = 0;
  bool drained_ = false;  // the start-up drain is done: later recoveries read the PEL by XPENDING
                          // // consecutive failed group re-creations: their backoff step
  std::thread thread_;
};

}  // namespace streamcar::consumer
