#include "sidecar/redis/topology/topology.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "sidecar/common/log.h"
#include "sidecar/redis/topology/cluster_map_reader.h"
#include "sidecar/redis/topology/node_options.h"
#include "sidecar/redis/topology/topology_impl.h"

namespace streamcar::redis {
namespace {

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

}  // namespace

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

std::optional<keys::NodeAddress> Topology::Impl::MapMasterFor(const SlotMap& map, int slot) {
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
    backoff = NextRetry(backoff);
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
