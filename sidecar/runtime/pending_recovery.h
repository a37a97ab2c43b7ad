#pragma once
// The recovery re-read of a consumer's own pending list (SPEC 4.3): after a lost read connection
// or an ambiguous settlement, entries may be pending for this consumer that nothing here holds (a
// reply lost with the connection carried them, or an acknowledgement may or may not have
// landed). It pages through the own pending list (XPENDING, which counts no delivery), refreshes
// the lease of the ids nothing holds while checking they are still ours (a peer's reclaim after
// an outage longer than claim.min_idle must not deliver them at the same time), fetches what is
// left (XRANGE), gives each its delivery count from XPENDING and routes it. Then the lanes the
// ledger kept for entries it was to bring back go on.
//
// It runs as steps of its host's read connection (runtime/group_intake.h), one at a time and
// only when its host says the connection is free; fetched entries take room like a read's.
//
// Threads: loop thread only. Callbacks run on the loop.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sidecar/common/status.h"
#include "sidecar/redis/async_connection.h"
#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/entry_ledger.h"
#include "sidecar/runtime/intake.h"

namespace streamcar::runtime {

// Upper bound of one read's COUNT, even when there is more room.
inline constexpr size_t kMaxReadCount = 1000;

// One command on a connection, as the intake's steps send them: the reply as it came (an error
// reply stays a reply), or the failure when no reply came.
void SendRaw(redis::AsyncConnection* connection, redis::Command command,
             std::function<void(StatusOr<redis::Reply>)> done);

class PendingRecovery {
 public:
  // Pending ids listed per XPENDING page.
  static constexpr int kPage = 1000;

  // What the re-read asks of the intake whose read connection it runs on.
  class Host {
   public:
    // How many entries a read may ask for now (0: paused, not worth it, or no room).
    virtual size_t ReadCount() = 0;
    virtual void Route(std::vector<StreamEntry> entries, IntakeSource source) = 0;
    // The step ended (the read connection is free): the next one.
    virtual void StepEnded() = 0;
    // The step failed (the read connection is free); AfterFailure says what the re-read makes of
    // it.
    virtual void RecoveryFailed(const Status& status) = 0;

   protected:
    ~Host() = default;
  };

  PendingRecovery(const std::string& subscription, const redis::SubscriptionOps& ops,
                  redis::AsyncConnection* read, EntryLedger* ledger, Host* host);

  // A re-read is asked for (from the start of the list, once the current one, if any, ends).
  void Request() { requested_ = true; }
  // A re-read is asked for or under way: its steps go before any read.
  bool Wanted() const { return recovering_ || requested_; }
  // Sends its next step on the read connection and returns true; false when there is no room
  // for what it would bring (nothing sent: the host waits for room).
  bool Next();
  // After Host::RecoveryFailed: logs the failure; while lanes are kept for entries it was to
  // bring back, asks for another re-read. True when it did (those lanes block their keys until
  // one succeeds).
  bool AfterFailure(const Status& status);

 private:
  void KeepAlive(std::vector<std::string> ids, bool reloaded);
  void Fetch(std::vector<std::string> ids);
  // Ends the current page: the next page, or the end.
  void PageDone();
  void Failed(const Status& status);
  void Done();

  template <typename F>
  auto Guard(F f) {
    return [alive = std::weak_ptr<bool>(alive_), f = std::move(f)](auto&&... args) mutable {
      if (alive.expired()) return;
      f(std::forward<decltype(args)>(args)...);
    };
  }

  const std::string& subscription_;
  const redis::SubscriptionOps& ops_;
  redis::AsyncConnection* read_;
  EntryLedger* ledger_;
  Host* host_;

  bool requested_ = false;
  bool recovering_ = false;
  std::string start_ = "-";
  bool last_page_ = false;
  std::map<std::string, int> counts_;  // delivery counts of the page's ids (XPENDING)
  size_t recovered_ = 0;
  uint64_t kept_up_to_ = 0;  // the ledger's kept_sequence() when this re-read began

  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace streamcar::runtime
