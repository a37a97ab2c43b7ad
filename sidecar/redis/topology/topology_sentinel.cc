// Topology in sentinel mode (topology.h): asking the sentinels for the master and confirming it
// with ROLE, and the background loop that follows +switch-master and asks again periodically.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/log.h"
#include "sidecar/redis/topology/cluster_map_reader.h"
#include "sidecar/redis/topology/node_options.h"
#include "sidecar/redis/topology/topology_impl.h"

namespace streamcar::redis {

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
      backoff = NextRetry(backoff);
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

}  // namespace streamcar::redis
