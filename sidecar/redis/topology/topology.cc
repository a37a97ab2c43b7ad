#include "sidecar/redis/topology/topology.h"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "sidecar/common/log.h"
#include "sidecar/redis/topology/cluster_map_reader.h"
#include "sidecar/redis/topology/node_options.h"
#include "sidecar/redis/topology/sentinel_client.h"
#include "sidecar/redis/topology/sentinel_watch.h"

namespace streamcar::redis {
namespace {

constexpr Millis kMovedRefreshGap{250};    // map reads requested by -MOVED: at most this often
constexpr Millis kRetryFirst{100};         // a failing node or discovery: ask again after this,
constexpr Millis kRetryCap{1000};          // doubling up to this
constexpr Millis kWatchPoll{200};          // how long the background thread waits without looking
                                           // at stop_ (so Stop() joins within about that)
constexpr Millis kBackgroundBudget{5000};  // one background discovery, retries included

using Cancelled = std::function<bool()>;

// For a topology nobody observes (a CLI command without metrics).
class NoObserver final : public TopologyObserver {
 public:
  void OnRedirect(ReplyKind /*kind*/) override {}
  void OnFailover() override {}
  void OnMastersKnown(int /*masters*/) override {}
};

TopologyObserver* OrNoObserver(TopologyObserver* observer) {
  static NoObserver none;
  return observer != nullptr ? observer : &none;
}

// Whether two maps name a different master (or none) for some slot.
bool OwnersDiffer(const SlotMap& a, const SlotMap& b) {
  for (int slot = 0; slot < keys::kClusterSlots; ++slot) {
    const Shard* x = a.ShardOf(slot);
    const Shard* y = b.ShardOf(slot);
    if ((x == nullptr) != (y == nullptr)) return true;
    if (x != nullptr && !(x->master.address == y->master.address)) return true;
  }
  return false;
}

// The master a map names for `slot` (-1: the first master), when it is usable.
std::optional<keys::NodeAddress> MapMasterFor(const SlotMap& map, int slot) {
  if (slot < 0) {
    for (const Shard& shard : map.shards()) {
      if (!shard.slots.empty() && shard.master.healthy) return shard.master.address;
    }
    auto masters = map.Masters();  // a master learned from -MOVED lists no ranges
    if (masters.empty()) return std::nullopt;
    return masters.front();
  }
  const Shard* shard = map.ShardOf(slot);
  if (shard == nullptr || !shard->master.healthy) return std::nullopt;
  return shard->master.address;
}

}  // namespace

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

Topology::Impl::Impl(TopologyOptions options, TopologyObserver* observer,
                     std::atomic<uint64_t>* version)
    : options_(std::move(options)),
      observer_(OrNoObserver(observer)),
      version_(version),
      url_node_(EndpointAddress(options_.data.endpoint)) {
  seeds_.push_back(url_node_);
  for (const keys::NodeAddress& seed : options_.seeds) {
    if (std::find(seeds_.begin(), seeds_.end(), seed) == seeds_.end()) seeds_.push_back(seed);
  }
  if (options_.mode == config::RedisMode::kSentinel) {
    std::vector<keys::NodeAddress> sentinels;
    for (const std::string& text : options_.sentinel.addresses) {
      std::string error;
      auto address = keys::ParseNodeAddress(text, &error);
      if (address) {
        sentinels.push_back(std::move(*address));
      } else {
        LogWarn("ignoring a redis.sentinel.addresses entry", {{"address", text}, {"error", error}});
      }
    }
    // The sentinels speak the url's scheme with redis.tls (as go-redis and KEDA do), and take
    // their own credentials.
    ConnectionOptions sentinel_options = ForDiscovery(options_.data);
    sentinel_options.topology.reset();
    if (sentinel_options.endpoint.kind == config::RedisEndpoint::Kind::kUnix) {
      sentinel_options.endpoint.kind = config::RedisEndpoint::Kind::kTcp;
    }
    sentinel_options.endpoint.db = 0;
    sentinel_options.username = options_.sentinel.username;
    sentinel_options.password = options_.sentinel.password;
    sentinels_ = std::make_unique<SentinelClient>(options_.sentinel.master, std::move(sentinels),
                                                  std::move(sentinel_options));
  }
}

ConnectionOptions Topology::Impl::OptionsFor(const keys::NodeAddress& node) const {
  ConnectionOptions options = PointedAt(options_.data, node);
  std::lock_guard lock(mu_);
  if (decided_ == ResolvedMode::kCluster) options.endpoint.db = 0;
  return options;
}

std::optional<keys::NodeAddress> Topology::Impl::KnownLocked(int slot) const {
  if (!mode_) return std::nullopt;
  switch (*mode_) {
    case ResolvedMode::kStandalone:
      return master_;
    case ResolvedMode::kSentinel:
      // A master reported failed (READONLY, a lost connection) is not known until confirmed
      // again: readiness must not say ready on a demoted master.
      if (master_stale_) return std::nullopt;
      return master_;
    case ResolvedMode::kCluster:
      return MapMasterFor(current_, slot);
  }
  return std::nullopt;
}

Millis Topology::Impl::Jittered(Millis interval) {
  // Never above the interval: SPEC 8 says "at least once a minute".
  std::uniform_real_distribution<double> spread(0.8, 1.0);
  return Millis(static_cast<int64_t>(static_cast<double>(interval.count()) * spread(random_)));
}

bool Topology::Impl::SleepFor(Millis delay) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, delay, [this] { return stop_; });
}

Status Topology::Impl::Retrying(SteadyTime deadline, const std::function<Status()>& attempt) {
  Millis backoff = kRetryFirst;
  while (true) {
    Status status = attempt();
    if (status.ok() || status.code() == StatusCode::kFatal ||
        status.code() == StatusCode::kInvalid || status.code() == StatusCode::kCancelled) {
      return status;
    }
    if (options_.clock->Now() + backoff >= deadline) return status;
    if (!SleepFor(backoff)) return Status(StatusCode::kCancelled, "topology stopping");
    backoff = std::min(backoff * 2, kRetryCap);
  }
}

// ---- Resolve ----------------------------------------------------------------------------------

Status Topology::Impl::Resolve(SteadyTime deadline) {
  std::lock_guard resolve_lock(resolve_mu_);
  if (mode()) return Status::Ok();
  return Retrying(deadline, [this] { return ResolveOnce(); });
}

Status Topology::Impl::ProbeMode(ResolvedMode* mode) {
  // Database 0 for the probe: a cluster refuses SELECT, and the error that matters is ours below.
  // The configured timeouts, not discovery's short ones: this is the deployment's one node, and
  // a slow link to it (TLS across regions) must not keep `run` from starting.
  ConnectionOptions options = PointedAt(options_.data, url_node_);
  options.endpoint.db = 0;
  auto connection = Connection::Open(options);
  if (!connection.ok()) return connection.status();
  auto info = (*connection)->Run(Command("INFO").Arg("cluster"));
  if (!info.ok()) {
    if (info.status().code() == StatusCode::kServerError) {
      // A deployment that ran before redis.mode existed (auto is the default) may use an ACL
      // user without INFO, or a server or proxy that renamed or refuses it: it keeps working as
      // it did, standalone, and is told how to be sure. Only I/O failures are retried.
      LogWarn(
          "redis.mode auto: the server refused INFO; assuming standalone (set redis.mode "
          "explicitly, or allow +info)",
          {{"error", info.status().message()}});
      *mode = ResolvedMode::kStandalone;
      return Status::Ok();
    }
    return info.status();
  }
  *mode = info->view().Str().find("cluster_enabled:1") != std::string_view::npos
              ? ResolvedMode::kCluster
              : ResolvedMode::kStandalone;
  return Status::Ok();
}

Status Topology::Impl::ResolveOnce() {
  std::optional<ResolvedMode> decided;
  {
    std::lock_guard lock(mu_);
    decided = decided_;
  }
  if (!decided) {
    ResolvedMode mode = ResolvedMode::kStandalone;
    switch (options_.mode) {
      case config::RedisMode::kStandalone:
        break;
      case config::RedisMode::kCluster:
        mode = ResolvedMode::kCluster;
        break;
      case config::RedisMode::kSentinel:
        mode = ResolvedMode::kSentinel;
        break;
      case config::RedisMode::kAuto:
        if (Status s = ProbeMode(&mode); !s.ok()) return s;
        // Standalone keeps the log it always had; `run` names a cluster in its own line.
        LogDebug("redis mode resolved", {{"mode", ResolvedModeName(mode)}});
        break;
    }
    if (mode == ResolvedMode::kCluster && options_.data.endpoint.db != 0) {
      // A configuration error (exit 2), found only now when `auto` meets a cluster.
      return Status(StatusCode::kInvalid, "redis.url: database " +
                                              std::to_string(options_.data.endpoint.db) +
                                              ": a cluster has only database 0");
    }
    std::lock_guard lock(mu_);
    decided_ = mode;
    decided = mode;
  }
  switch (*decided) {
    case ResolvedMode::kStandalone: {
      {
        std::lock_guard lock(mu_);
        master_ = url_node_;
        mode_ = ResolvedMode::kStandalone;
      }
      observer_->OnMastersKnown(1);
      return Status::Ok();
    }
    case ResolvedMode::kCluster: {
      Status s = RefreshCluster(options_.clock->Now() + kBackgroundBudget, nullptr, nullptr);
      if (s.ok()) {
        std::lock_guard lock(mu_);
        mode_ = ResolvedMode::kCluster;
      }
      return s;
    }
    case ResolvedMode::kSentinel: {
      Status s = DiscoverMaster(options_.clock->Now() + kBackgroundBudget, nullptr, nullptr);
      if (s.ok()) {
        std::lock_guard lock(mu_);
        mode_ = ResolvedMode::kSentinel;
      }
      return s;
    }
  }
  return Status(StatusCode::kInvalid, "unknown redis mode");
}

// ---- MasterFor and reports --------------------------------------------------------------------

StatusOr<keys::NodeAddress> Topology::Impl::MasterFor(int slot) {
  {
    // After Stop nothing asks the servers again: a connection opening at shutdown gives up at
    // once instead of holding the process past its grace period.
    std::lock_guard lock(mu_);
    if (stop_) return Status(StatusCode::kCancelled, "topology stopping");
  }
  const SteadyTime deadline =
      options_.clock->Now() + options_.data.connect_timeout + options_.data.command_timeout;
  auto resolved = mode();
  if (!resolved) {
    if (Status s = Resolve(deadline); !s.ok()) return s;
    resolved = mode();
  }
  Status asked = Status::Ok();
  if (*resolved == ResolvedMode::kCluster) {
    auto needed = [this, slot] {
      std::lock_guard lock(mu_);
      return NeedsMapLocked(slot);
    };
    if (needed()) asked = RefreshCluster(deadline, needed, nullptr);
  } else if (*resolved == ResolvedMode::kSentinel) {
    auto needed = [this] {
      std::lock_guard lock(mu_);
      return !master_ || master_stale_;
    };
    if (needed()) {
      asked = Retrying(deadline, [&] { return DiscoverMaster(deadline, needed, nullptr); });
      if (!asked.ok()) ForgetStaleMaster();
    }
  }
  if (!asked.ok()) return asked;
  std::lock_guard lock(mu_);
  auto known = KnownLocked(slot);
  if (known) return *known;
  return Status(StatusCode::kIo, slot < 0 ? std::string("no Redis master is known")
                                          : "no Redis master serves slot " + std::to_string(slot));
}

void Topology::Impl::OnMoved(const Redirect& redirect, const keys::NodeAddress& answered) {
  observer_->OnRedirect(ReplyKind::kMoved);
  keys::NodeAddress to = redirect.to;
  if (to.host.empty()) to.host = answered.host;  // the node's endpoint is unknown: its host
  std::lock_guard lock(mu_);
  if (mode_ != ResolvedMode::kCluster) return;
  if (to.host != "?") {
    const auto before = MapMasterFor(current_, redirect.slot);
    current_.LearnMoved(redirect.slot, to);
    if (before != MapMasterFor(current_, redirect.slot)) {
      version_->fetch_add(1, std::memory_order_acq_rel);
    }
  }
  refresh_requested_ = true;  // "?" (no usable host): only the map can say where it went
  cv_.notify_all();
}

void Topology::Impl::OnNodeFailed(const keys::NodeAddress& node, std::string_view why) {
  LogDebug("redis node failed", {{"node", node.Describe()}, {"why", why}});
  std::lock_guard lock(mu_);
  if (decided_ == ResolvedMode::kCluster) {
    failed_[node] = ++failure_seq_;
    suspects_.insert(node);
    failing_ = true;
    cv_.notify_all();
  } else if (decided_ == ResolvedMode::kSentinel && master_ == node) {
    master_stale_ = true;
    cv_.notify_all();
  }
}

// ---- Cluster ----------------------------------------------------------------------------------

bool Topology::Impl::NeedsMapLocked(int slot) const {
  if (!has_map_) return true;
  auto master = MapMasterFor(current_, slot);
  return !master || failed_.count(*master) > 0;
}

Cancelled Topology::Impl::PastDeadline(SteadyTime deadline, const Cancelled& cancelled) const {
  // Each node or sentinel asked costs up to the discovery connect cap: the next is not asked
  // once the caller's deadline has passed (a partition must not hold a caller, or a shutdown,
  // for a cap per node).
  return [this, deadline, cancelled] {
    return (cancelled && cancelled()) || options_.clock->Now() >= deadline;
  };
}

Status Topology::Impl::TimedOutUnlessCancelled(const Status& status, const Cancelled& cancelled,
                                               std::string_view asked) {
  if (status.code() != StatusCode::kCancelled || (cancelled && cancelled())) return status;
  return Status(StatusCode::kTimeout, std::string(asked) + ": no answer before the deadline");
}

Status Topology::Impl::RefreshCluster(SteadyTime deadline,
                                      const std::function<bool()>& still_needed,
                                      const Cancelled& cancelled) {
  DiscoveryTurn::Held discovering(discover_turn_, deadline);
  if (!discovering) {
    return Status(StatusCode::kTimeout, "the cluster map is being read: no answer in time");
  }
  if (still_needed && !still_needed()) return Status::Ok();
  std::vector<keys::NodeAddress> candidates;
  uint64_t failures_before = 0;
  {
    std::lock_guard lock(mu_);
    if (has_map_) candidates = current_.RefreshCandidates();
    failures_before = failure_seq_;
    // Nodes reported failed last: each may cost a connect or command timeout, and the deadline
    // is checked between nodes, so silent ones first would use it up on every read.
    std::stable_partition(
        candidates.begin(), candidates.end(),
        [this](const keys::NodeAddress& node) { return !failed_.contains(node); });
  }
  for (const keys::NodeAddress& seed : seeds_) {
    if (std::find(candidates.begin(), candidates.end(), seed) == candidates.end()) {
      candidates.push_back(seed);
    }
  }
  auto read = ReadClusterMap(
      candidates, [this](const keys::NodeAddress& node) { return ForDiscovery(OptionsFor(node)); },
      options_.used_slots, PastDeadline(deadline, cancelled));
  if (!read.ok()) return TimedOutUnlessCancelled(read.status(), cancelled, "the cluster map");
  AdoptMap(std::move(read->map), read->from, failures_before);
  return Status::Ok();
}

void Topology::Impl::AdoptMap(SlotMap map, const keys::NodeAddress& from,
                              uint64_t failures_before) {
  std::set<keys::NodeAddress> failed_over;  // the old masters of used slots that a replica replaced
  bool changed = true;
  size_t masters = 0;
  {
    std::lock_guard lock(mu_);
    if (has_map_) {
      for (int slot : options_.used_slots) {
        const Shard* old = last_read_.ShardOf(slot);
        const Shard* now = map.ShardOf(slot);
        if (old == nullptr || now == nullptr || old->master.address == now->master.address) {
          continue;
        }
        const auto& replicas = replicas_of_[old->master.address];
        if (map.IsFailover(slot, last_read_) ||
            std::find(replicas.begin(), replicas.end(), now->master.address) != replicas.end()) {
          failed_over.insert(old->master.address);
        }
      }
      changed = OwnersDiffer(current_, map);
    }
    // Counted before the new owners are visible: whoever sees the new master sees the failover.
    for (size_t i = 0; i < failed_over.size(); ++i) observer_->OnFailover();
    for (const Shard& shard : map.shards()) {
      if (shard.replicas.empty()) continue;
      auto& replicas = replicas_of_[shard.master.address];
      replicas.clear();
      for (const ClusterNode& replica : shard.replicas) replicas.push_back(replica.address);
    }
    current_ = map;
    last_read_ = std::move(map);
    has_map_ = true;
    std::erase_if(failed_, [&](const auto& entry) { return entry.second <= failures_before; });
    masters = current_.Masters().size();
    if (changed) version_->fetch_add(1, std::memory_order_acq_rel);
  }
  if (changed) {
    LogInfo("redis cluster map adopted",
            {{"from", from.Describe()}, {"masters", static_cast<int64_t>(masters)}});
  }
  for (const keys::NodeAddress& old : failed_over) {
    LogWarn("redis cluster failover", {{"old_master", old.Describe()}});
  }
  observer_->OnMastersKnown(static_cast<int>(masters));
}

void Topology::Impl::ClusterLoop() {
  SteadyTime next_periodic = options_.clock->Now() + Jittered(options_.refresh_interval);
  SteadyTime last_refresh = options_.clock->Now();
  SteadyTime last_moved_refresh{};
  Millis failing_backoff = kRetryFirst;
  std::unique_lock lock(mu_);
  while (!stop_) {
    SteadyTime wake = next_periodic;
    if (refresh_requested_) wake = std::min(wake, last_moved_refresh + kMovedRefreshGap);
    if (failing_) wake = std::min(wake, last_refresh + failing_backoff);
    const SteadyTime now = options_.clock->Now();
    if (now < wake) {
      cv_.wait_for(lock, wake - now);
      continue;  // woken by a request, Stop(), or the time: decide again
    }
    const bool for_moved = refresh_requested_;
    refresh_requested_ = false;
    lock.unlock();
    Status status = RefreshCluster(options_.clock->Now() + kBackgroundBudget, nullptr,
                                   [this] { return Stopping(); });
    if (!status.ok() && status.code() != StatusCode::kCancelled) {
      LogWarn("cannot read the redis cluster map", {{"error", status.message()}});
    }
    const bool unsettled = !status.ok() || SuspectsRemain();
    lock.lock();
    last_refresh = options_.clock->Now();
    if (for_moved) last_moved_refresh = last_refresh;
    next_periodic = last_refresh + Jittered(options_.refresh_interval);
    // A failed read, or a node reported lost that is still a master and still silent (the
    // cluster has not promoted its replica yet): read again at 100 ms doubling to 1 s.
    if (unsettled || !suspects_.empty()) {
      failing_backoff = failing_ ? std::min(failing_backoff * 2, kRetryCap) : kRetryFirst;
      failing_ = true;
    } else {
      failing_ = false;
      failing_backoff = kRetryFirst;
    }
  }
}

bool Topology::Impl::SuspectsRemain() {
  std::vector<keys::NodeAddress> suspects;
  {
    std::lock_guard lock(mu_);
    const std::vector<keys::NodeAddress> masters = current_.Masters();
    std::erase_if(suspects_, [&](const keys::NodeAddress& node) {
      return std::find(masters.begin(), masters.end(), node) == masters.end();
    });
    suspects.assign(suspects_.begin(), suspects_.end());
  }
  for (const keys::NodeAddress& node : suspects) {
    if (Stopping()) return true;
    auto connection = Connection::Open(ForDiscovery(OptionsFor(node)));  // PINGs
    if (!connection.ok()) continue;
    std::lock_guard lock(mu_);
    suspects_.erase(node);
  }
  std::lock_guard lock(mu_);
  return !suspects_.empty();
}

// ---- Sentinel ---------------------------------------------------------------------------------

Status Topology::Impl::DiscoverMaster(SteadyTime deadline,
                                      const std::function<bool()>& still_needed,
                                      const Cancelled& cancelled) {
  DiscoveryTurn::Held discovering(discover_turn_, deadline);
  if (!discovering) {
    return Status(StatusCode::kTimeout, "the sentinels are being asked: no answer in time");
  }
  if (still_needed && !still_needed()) return Status::Ok();
  auto address = sentinels_->AskMaster(PastDeadline(deadline, cancelled));
  if (!address.ok()) return TimedOutUnlessCancelled(address.status(), cancelled, "the sentinels");
  if (Status s = ConfirmMaster(ForDiscovery(OptionsFor(*address)), *address); !s.ok()) return s;
  AdoptMaster(*address);
  return Status::Ok();
}

Status Topology::Impl::ConfirmAndAdopt(const keys::NodeAddress& address) {
  DiscoveryTurn::Held discovering(discover_turn_, std::nullopt);
  if (Status s = ConfirmMaster(ForDiscovery(OptionsFor(address)), address); !s.ok()) return s;
  AdoptMaster(address);
  return Status::Ok();
}

void Topology::Impl::AdoptMaster(const keys::NodeAddress& address) {
  bool changed = false;
  std::optional<keys::NodeAddress> before;
  {
    std::lock_guard lock(mu_);
    before = master_;
    changed = master_ != address;
    // Counted before the new master is visible: whoever sees it sees the failover.
    if (changed && before) observer_->OnFailover();
    master_ = address;
    master_stale_ = false;
    if (changed) version_->fetch_add(1, std::memory_order_acq_rel);
  }
  if (changed) LogInfo("redis master found", {{"master", address.Describe()}});
  if (changed && before) {
    LogWarn("redis sentinel failover",
            {{"old_master", before->Describe()}, {"master", address.Describe()}});
  }
  observer_->OnMastersKnown(1);
}

void Topology::Impl::ForgetStaleMaster() {
  {
    std::lock_guard lock(mu_);
    if (!master_stale_ || !master_) return;
    master_.reset();
    version_->fetch_add(1, std::memory_order_acq_rel);
  }
  observer_->OnMastersKnown(0);
}

void Topology::Impl::BackgroundResolve() {
  const SteadyTime deadline = options_.clock->Now() + kBackgroundBudget;
  Status s = Retrying(
      deadline, [&] { return DiscoverMaster(deadline, nullptr, [this] { return Stopping(); }); });
  if (s.ok() || s.code() == StatusCode::kCancelled) return;
  LogWarn("cannot find the redis master", {{"error", s.message()}});
  ForgetStaleMaster();
}

std::unique_ptr<SwitchMasterWatch> Topology::Impl::OpenWatch(
    std::optional<keys::NodeAddress>* watched) {
  std::vector<keys::NodeAddress> order = sentinels_->Order();
  if (*watched) {
    // Lost: start with the sentinel after the one that was watched.
    auto it = std::find(order.begin(), order.end(), **watched);
    if (it != order.end()) std::rotate(order.begin(), it + 1, order.end());
  }
  for (const keys::NodeAddress& sentinel : order) {
    if (Stopping()) return nullptr;
    auto watch = SwitchMasterWatch::Open(sentinels_->OptionsFor(sentinel));
    if (watch.ok()) {
      *watched = sentinel;
      return std::move(*watch);
    }
    LogWarn("cannot subscribe to +switch-master",
            {{"sentinel", sentinel.Describe()}, {"error", watch.status().message()}});
  }
  return nullptr;
}

void Topology::Impl::SentinelLoop() {
  SteadyTime next_check = options_.clock->Now() + Jittered(options_.refresh_interval);
  std::optional<keys::NodeAddress> watched;
  Millis backoff = kRetryFirst;
  bool first = true;
  while (!Stopping()) {
    auto watch = OpenWatch(&watched);
    if (watch == nullptr) {
      if (!SleepFor(backoff)) return;
      backoff = std::min(backoff * 2, kRetryCap);
      continue;
    }
    backoff = kRetryFirst;
    // A switch may have happened while nobody listened (not before the first subscription:
    // Resolve has just asked).
    if (!first) BackgroundResolve();
    first = false;
    while (!Stopping()) {
      bool stale = false;
      {
        std::lock_guard lock(mu_);
        stale = !master_ || master_stale_;
      }
      if (stale || options_.clock->Now() >= next_check) {
        BackgroundResolve();
        next_check = options_.clock->Now() + Jittered(options_.refresh_interval);
      }
      auto next = watch->Next(sentinels_->master_name(),
                              std::min(options_.clock->Now() + kWatchPoll, next_check));
      if (!next.ok()) {
        LogWarn("lost the sentinel subscription",
                {{"sentinel", watched ? watched->Describe() : std::string()},
                 {"error", next.status().message()}});
        break;
      }
      if (!next->has_value()) continue;
      LogInfo("+switch-master", {{"master", (*next)->Describe()}});
      // The announced master, once ROLE confirms it: asking a sentinel that has not heard of
      // the switch yet would name the old master, which still says master for seconds.
      if (!ConfirmAndAdopt(**next).ok()) BackgroundResolve();
    }
  }
}

// ---- The thread -------------------------------------------------------------------------------

void Topology::Impl::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stop_ || !mode_ || *mode_ == ResolvedMode::kStandalone) return;
  if (*mode_ == ResolvedMode::kCluster) {
    thread_ = std::thread([this] { ClusterLoop(); });
  } else {
    thread_ = std::thread([this] { SentinelLoop(); });
  }
}

void Topology::Impl::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// ---- Topology ---------------------------------------------------------------------------------

Topology::Topology(TopologyOptions options, TopologyObserver* observer)
    : impl_(std::make_unique<Impl>(std::move(options), observer, &version_)) {}

// The background thread touches version_: it is joined before any member goes.
Topology::~Topology() { impl_->Stop(); }

Status Topology::Resolve(SteadyTime deadline) { return impl_->Resolve(deadline); }
std::optional<ResolvedMode> Topology::mode() const { return impl_->mode(); }
StatusOr<keys::NodeAddress> Topology::MasterFor(int slot) { return impl_->MasterFor(slot); }
std::optional<keys::NodeAddress> Topology::KnownMasterFor(int slot) const {
  return impl_->KnownMasterFor(slot);
}
std::optional<int> Topology::KnownReplicasFor(int slot, const keys::NodeAddress& master) const {
  return impl_->KnownReplicasFor(slot, master);
}
void Topology::OnMoved(const Redirect& redirect, const keys::NodeAddress& answered) {
  impl_->OnMoved(redirect, answered);
}
void Topology::OnAsk() { impl_->OnAsk(); }
void Topology::OnNodeFailed(const keys::NodeAddress& node, std::string_view why) {
  impl_->OnNodeFailed(node, why);
}
void Topology::Start() { impl_->Start(); }
void Topology::Stop() { impl_->Stop(); }
ConnectionOptions Topology::OptionsFor(const keys::NodeAddress& node) const {
  return impl_->OptionsFor(node);
}

}  // namespace streamcar::redis
