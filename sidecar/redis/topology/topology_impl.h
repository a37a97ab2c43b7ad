#pragma once
// The inside of Topology (topology.h), shared by its three sources: topology.cc (resolving the
// mode, answering MasterFor, the background thread), topology_cluster.cc (the cluster's map) and
// topology_sentinel.cc (the sentinels' master). Only those three include it.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "sidecar/redis/topology/sentinel_client.h"
#include "sidecar/redis/topology/sentinel_watch.h"
#include "sidecar/redis/topology/slot_map.h"
#include "sidecar/redis/topology/topology.h"

namespace streamcar::redis {

// Asked during a long wait: true to give up (Stop() was called, or a deadline passed).
using Cancelled = std::function<bool()>;

// One map read or sentinel discovery at a time, waited for until a deadline. A flag under a plain
// mutex, not std::timed_mutex: ThreadSanitizer (GCC 12) does not see pthread_mutex_clocklock,
// which try_lock_until uses, and reports the unlock as a misuse.
class DiscoveryTurn {
 public:
  class Held {
   public:
    // Waits until `deadline` (nullopt: as long as it takes).
    Held(DiscoveryTurn& turn, std::optional<SteadyTime> deadline) : turn_(turn) {
      std::unique_lock lock(turn_.mu_);
      auto is_free = [&] { return !turn_.busy_; };
      if (deadline) {
        held_ = turn_.free_.wait_until(lock, *deadline, is_free);
      } else {
        turn_.free_.wait(lock, is_free);
        held_ = true;
      }
      if (held_) turn_.busy_ = true;
    }
    ~Held() {
      if (!held_) return;
      {
        std::lock_guard lock(turn_.mu_);
        turn_.busy_ = false;
      }
      turn_.free_.notify_one();
    }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    explicit operator bool() const { return held_; }

   private:
    DiscoveryTurn& turn_;
    bool held_ = false;
  };

 private:
  std::mutex mu_;
  std::condition_variable free_;
  bool busy_ = false;
};

class Topology::Impl {
 public:
  Impl(TopologyOptions options, TopologyObserver* observer, std::atomic<uint64_t>* version);
  ~Impl() { Stop(); }

  Status Resolve(SteadyTime deadline);
  std::optional<ResolvedMode> mode() const {
    std::lock_guard lock(mu_);
    return mode_;
  }
  StatusOr<keys::NodeAddress> MasterFor(int slot);
  std::optional<keys::NodeAddress> KnownMasterFor(int slot) const {
    std::lock_guard lock(mu_);
    return KnownLocked(slot);
  }
  std::optional<int> KnownReplicasFor(int slot, const keys::NodeAddress& master) const {
    std::lock_guard lock(mu_);
    if (mode_ != ResolvedMode::kCluster || !has_map_) return std::nullopt;
    if (MapMasterFor(current_, slot) != master) return std::nullopt;
    return current_.LiveReplicasOf(slot);
  }
  void OnMoved(const Redirect& redirect, const keys::NodeAddress& answered);
  void OnAsk() { observer_->OnRedirect(ReplyKind::kAsk); }
  void OnNodeFailed(const keys::NodeAddress& node, std::string_view why);
  void Start();
  void Stop();
  ConnectionOptions OptionsFor(const keys::NodeAddress& node) const;

 private:
  std::optional<keys::NodeAddress> KnownLocked(int slot) const;
  Status ResolveOnce();
  Status ProbeMode(ResolvedMode* mode);
  // Retries `attempt` (100 ms doubling to 1 s) until it succeeds, fails for good, or `deadline`.
  Status Retrying(SteadyTime deadline, const std::function<Status()>& attempt);
  // Waits `delay` unless Stop() is called; false when it was.
  bool SleepFor(Millis delay);
  bool Stopping() const {
    std::lock_guard lock(mu_);
    return stop_;
  }

  // Cluster: reads the map (one reader at a time; `still_needed` is asked again once it is this
  // caller's turn, as another reader may have done the work) and adopts it.
  // `cancelled`, or true once `deadline` has passed.
  Cancelled PastDeadline(SteadyTime deadline, const Cancelled& cancelled) const;
  // A read stopped by PastDeadline's deadline (not by `cancelled`) is a timeout, retried as one.
  static Status TimedOutUnlessCancelled(const Status& status, const Cancelled& cancelled,
                                        std::string_view asked);
  Status RefreshCluster(SteadyTime deadline, const std::function<bool()>& still_needed,
                        const Cancelled& cancelled);
  void AdoptMap(SlotMap map, const keys::NodeAddress& from, uint64_t failures_before);
  bool NeedsMapLocked(int slot) const;
  // Drops the suspects that are no longer masters or answer a PING; whether any is left.
  bool SuspectsRemain();
  void ClusterLoop();

  // Sentinel: asks the sentinels and confirms ROLE (one discovery at a time, see above).
  Status DiscoverMaster(SteadyTime deadline, const std::function<bool()>& still_needed,
                        const Cancelled& cancelled);
  // `address` (from +switch-master) when ROLE says it is the master.
  Status ConfirmAndAdopt(const keys::NodeAddress& address);
  void AdoptMaster(const keys::NodeAddress& address);
  // After a discovery that failed while the master was reported failed: no master is known.
  void ForgetStaleMaster();
  void BackgroundResolve();
  void SentinelLoop();
  std::unique_ptr<SwitchMasterWatch> OpenWatch(std::optional<keys::NodeAddress>* watched);

  Millis Jittered(Millis interval);
  // The wait after `backoff` in a run of failures: doubling from kRetryFirst, capped at kRetryCap.
  // Not the reconnect backoff (common/backoff.h's RetryStreak): this one is not jittered and stops
  // at 1 s, as the topology's map reads and discoveries always have.
  static Millis NextRetry(Millis backoff) { return std::min(backoff * 2, kRetryCap); }
  // The master a map names for `slot` (-1: the first master), when it is usable.
  static std::optional<keys::NodeAddress> MapMasterFor(const SlotMap& map, int slot);

  static constexpr Millis kMovedRefreshGap{250};  // map reads requested by -MOVED: at most this
                                                  // often
  static constexpr Millis kRetryFirst{100};  // a failing node or discovery: ask again after this,
  static constexpr Millis kRetryCap{1000};   // doubling up to this (NextRetry)
  static constexpr Millis kWatchPoll{200};   // how long the background thread waits without
                                             // looking at stop_ (so Stop() joins within about that)
  static constexpr Millis kBackgroundBudget{5000};  // one background discovery, retries included

  const TopologyOptions options_;
  TopologyObserver* const observer_;
  std::atomic<uint64_t>* const version_;
  const keys::NodeAddress url_node_;
  std::vector<keys::NodeAddress> seeds_;            // the url's node first, each once
  std::unique_ptr<SentinelClient> sentinels_;       // sentinel mode only
  std::mt19937_64 random_{std::random_device{}()};  // background thread only

  std::mutex resolve_mu_;        // one Resolve at a time
  DiscoveryTurn discover_turn_;  // one map read or sentinel discovery at a time

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::optional<ResolvedMode> decided_;  // the mode, once known (auto probed)
  std::optional<ResolvedMode> mode_;     // the mode, once its first map or master is known
  // Cluster: the last map read (what failovers are judged against) and that map corrected by
  // -MOVED since (what MasterFor answers).
  SlotMap last_read_;
  SlotMap current_;
  bool has_map_ = false;
  // The replicas last listed for each master. A read during a failure may list a dead master
  // without its replicas (CLUSTER SLOTS on 7.0.15 after a kill -9): the promotion that follows
  // is still a failover.
  std::map<keys::NodeAddress, std::vector<keys::NodeAddress>> replicas_of_;
  std::map<keys::NodeAddress, uint64_t> failed_;  // node -> failure_seq_ when it was reported
  uint64_t failure_seq_ = 0;
  // Nodes reported failed that the background thread watches: the map is read again (100 ms
  // doubling to 1 s) until each is no longer a master or answers again.
  std::set<keys::NodeAddress> suspects_;
  bool failing_ = false;            // read the map again soon, backing off
  bool refresh_requested_ = false;  // by -MOVED
  // Sentinel (and standalone): the master; stale once reported failed, until asked again.
  std::optional<keys::NodeAddress> master_;
  bool master_stale_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace streamcar::redis
