// Topology in cluster mode (topology.h): reading the slot map, adopting it (a failover is a slot
// whose master changed), and the background loop that reads it again periodically, after -MOVED,
// and while a node reported failed is still a silent master.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/log.h"
#include "sidecar/redis/topology/cluster_map_reader.h"
#include "sidecar/redis/topology/node_options.h"
#include "sidecar/redis/topology/topology_impl.h"

namespace streamcar::redis {
namespace {

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

}  // namespace

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
      failing_backoff = failing_ ? NextRetry(failing_backoff) : kRetryFirst;
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

}  // namespace streamcar::redis
