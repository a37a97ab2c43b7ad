#include "sidecar/app/run.h"

#include <prometheus/gauge.h>
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <random>

#include "sidecar/admin/admin_server.h"
#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/common/version.h"
#include "sidecar/config/dead_letter_default.h"
#include "sidecar/config/validate.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/keys/sharding_keys.h"
#include "sidecar/log/api_server.h"
#include "sidecar/log/archive_store.h"
#include "sidecar/log/lazy_archive.h"
#include "sidecar/log/retention.h"
#include "sidecar/redis/topology/topology.h"
#include "sidecar/runtime/subscription_loop.h"
#include "sidecar/sharding/sharded_subscription.h"

namespace streamcar::app {
namespace {

// The first fatal error reported by any thread. It wakes the main thread, which waits for
// signals only (SIGUSR1 is the wake-up).
class FatalLatch {
 public:
  explicit FatalLatch(pthread_t main_thread) : main_thread_(main_thread) {}
  void Report(const Status& status) {
    {
      std::lock_guard lock(mutex_);
      if (status_) return;
      status_ = status;
    }
    pthread_kill(main_thread_, SIGUSR1);
  }
  std::optional<Status> Get() const {
    std::lock_guard lock(mutex_);
    return status_;
  }

 private:
  const pthread_t main_thread_;
  mutable std::mutex mutex_;
  std::optional<Status> status_;
};

// A member id of a sharded subscription (KIP-1082): 128 random bits, for the process's lifetime.
std::string NewMemberId() {
  std::random_device random;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 32; ++i) id += kHex[random() % 16];
  return id;
}

// Each subscription keeps up to handler.concurrency handler connections open besides its Redis
// connections: at concurrency 1024 that passes the usual soft limit of 1024 descriptors.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

// The slots of every key this process uses: a cluster map is adopted only when it serves them.
std::vector<int> UsedSlots(const config::Config& config) {
  std::vector<int> slots;
  for (const auto& sub : config.subscriptions) {
    if (sub.sharding.enabled()) {
      // The coordinator's keys, and each shard's (its stream, fence and dead letters share it).
      slots.push_back(keys::KeySlot(keys::CoordinatorKeysFor(sub.stream, sub.group).meta));
      for (int shard = 0; shard < sub.sharding.shards; ++shard) {
        slots.push_back(keys::KeySlot(keys::ShardKey(sub.ShardKeyPattern(), shard)));
      }
      continue;
    }
    slots.push_back(keys::KeySlot(sub.stream));
    // A defaulted dead-letter stream shares the stream's slot in a cluster (settled after
    // `auto` resolves; outside a cluster slots do not matter).
    if (!sub.dead_letter.stream_defaulted) slots.push_back(keys::KeySlot(sub.dead_letter.stream));
  }
  for (const auto& stream : config.streams) slots.push_back(keys::KeySlot(stream.name));
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  return slots;
}

// SPEC 8: not ready while no master is known for a subscribed stream ("" when every one has one).
std::string NoMasterFor(const config::Config& config, const redis::Topology* topology) {
  if (topology == nullptr) return "";
  for (const auto& sub : config.subscriptions) {
    // A sharded subscription needs its coordinator first: its shards move with the group.
    const std::string key =
        sub.sharding.enabled() ? keys::CoordinatorKeysFor(sub.stream, sub.group).meta : sub.stream;
    const int slot = keys::KeySlot(key);
    if (!topology->KnownMasterFor(slot)) {
      return std::string("no Redis master known for ") +
             (sub.sharding.enabled() ? "coordinator key " : "stream ") + key + " (slot " +
             std::to_string(slot) + ")";
    }
  }
  return "";
}

// Learns the deployment's topology before anything connects (SPEC 8). While Redis cannot be
// reached this retries with backoff, as every connection does (SPEC 4.1), and a SIGTERM ends the
// wait. Returns the exit code to leave with, or nullopt once resolved.
std::optional<int> ResolveTopology(redis::Topology& topology, const sigset_t& signals,
                                   Millis connect_timeout) {
  for (int failures = 0;; ++failures) {
    // One connect timeout per attempt: the log below then keeps SPEC 4.1's pace.
    const Status status = topology.Resolve(SteadyClock::now() + connect_timeout);
    if (status.ok()) return std::nullopt;
    if (status.code() == StatusCode::kInvalid) {  // auto met a cluster the config cannot use
      LogError("configuration error: " + status.message(), {{"exit_code", 2}});
      return 2;
    }
    if (status.code() == StatusCode::kFatal) {
      LogError("fatal: " + status.message(), {{"exit_code", 1}});
      return 1;
    }
    const Millis retry_in = ReconnectDelay(failures, Millis(100), Millis(5000), UnitRandom());
    // The words every connection uses for this (operators and their alerts know them).
    LogWarn("redis unreachable, retrying",
            {{"role", "topology"},
             {"error", status.message()},
             {"retry_in_ms", static_cast<int64_t>(retry_in.count())}});
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(retry_in);
    const timespec wait{static_cast<time_t>(seconds.count()),
                        static_cast<long>((retry_in - seconds).count() * 1000000)};
    const int received = sigtimedwait(&signals, nullptr, &wait);
    if (received == SIGTERM || received == SIGINT) {
      LogInfo("shutdown complete", {{"left_pending", int64_t{0}}, {"drained", true}});
      return 0;
    }
  }
}

// The kFatal error of a key the server hashes otherwise than streamcar (`server_slot`).
Status SlotDisagreement(const config::Subscription& sub, const std::string& key,
                        int64_t server_slot, int slot) {
  return Status(StatusCode::kFatal, "subscription " + sub.name + ": Redis puts key \"" + key +
                                        "\" in slot " + std::to_string(server_slot) +
                                        ", streamcar computed " + std::to_string(slot) +
                                        " (a proxy between us and the cluster?)");
}

// SHARDING.md B1: each shard's stream, fence and dead-letter keys must share one slot (every
// fenced script touches them together; a cluster refuses a script whose keys span slots, so the
// shard would never be read). Asked of the server with CLUSTER KEYSLOT (`connection`; null:
// streamcar's own hashing only), a page of shards per pipeline. A split is the configuration's
// (kInvalid, exit 2, naming the subscription, the shard and its keys); the server hashing
// otherwise than streamcar is kFatal, as for a plain subscription.
Status CheckShardSlots(const config::Subscription& sub, const std::string& path,
                       redis::Connection* connection) {
  constexpr int kShardsPerPipeline = 256;
  const std::string pattern = sub.ShardKeyPattern();
  for (int first = 0; first < sub.sharding.shards; first += kShardsPerPipeline) {
    const int last = std::min(sub.sharding.shards, first + kShardsPerPipeline);
    std::vector<std::array<std::string, 3>> keys;
    std::vector<redis::Command> asks;
    for (int shard = first; shard < last; ++shard) {
      const std::string stream = keys::ShardKey(pattern, shard);
      keys.push_back({stream, keys::FenceKey(stream, sub.group), keys::ShardDeadLetterKey(stream)});
      for (const auto& key : keys.back()) {
        asks.push_back(redis::Command("CLUSTER").Arg("KEYSLOT").Arg(key));
      }
    }
    std::vector<redis::Reply> replies;
    if (connection != nullptr) {
      auto answered = connection->RunPipeline(asks);
      if (answered.ok()) {
        replies = std::move(*answered);
      } else {
        LogWarn(
            "cannot check the shards' slots with CLUSTER KEYSLOT now; using streamcar's own "
            "hashing",
            {{"subscription", sub.name}, {"error", answered.status().message()}});
        connection = nullptr;
      }
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      std::array<int, 3> slots{};
      for (size_t k = 0; k < 3; ++k) {
        slots[k] = keys::KeySlot(keys[i][k]);
        if (replies.empty()) continue;
        const auto& reply = replies[i * 3 + k];
        if (reply.view().IsInteger() && reply.view().Integer() != slots[k]) {
          return SlotDisagreement(sub, keys[i][k], reply.view().Integer(), slots[k]);
        }
      }
      if (slots[0] == slots[1] && slots[0] == slots[2]) continue;
      const auto named = [&](size_t k) {
        return "\"" + keys[i][k] + "\" (slot " + std::to_string(slots[k]) + ")";
      };
      return Status(StatusCode::kInvalid,
                    path + ".sharding.key_pattern: subscription " + sub.name + ", shard " +
                        std::to_string(first + static_cast<int>(i)) +
                        ": its stream, fence and dead-letter keys " + named(0) + ", " + named(1) +
                        " and " + named(2) +
                        " are in different slots of the cluster; put %d inside a hash tag, like "
                        "\"" +
                        sub.stream + ":{%d}\" (got \"" + pattern + "\")");
    }
  }
  // Mode auto met a cluster: the pattern rule `check` applies to mode cluster holds too.
  if (std::string why = config::ClusterKeyPatternProblem(sub); !why.empty()) {
    return Status(StatusCode::kInvalid, path + ".sharding.key_pattern: " + why);
  }
  LogInfo("shard slots", {{"subscription", sub.name},
                          {"shards", int64_t{sub.sharding.shards}},
                          {"key_pattern", pattern},
                          {"checked_by", connection != nullptr ? "CLUSTER KEYSLOT" : "streamcar"}});
  return Status::Ok();
}

// SPEC 8: in a cluster, checks each subscription's slots with the server's CLUSTER KEYSLOT (a
// proxy or a server that hashes otherwise would break every multi-key step) and logs which
// dead-letter path it takes. Returns the subscriptions whose dead letters take the two-step path;
// an error when the server disagrees with our hashing (kFatal) or a sharded subscription's keys
// cannot serve a cluster (kInvalid: a configuration error).
StatusOr<std::vector<bool>> CheckClusterSlots(const config::Config& config,
                                              const redis::ConnectionOptions& options) {
  std::vector<bool> two_step;
  for (size_t index = 0; index < config.subscriptions.size(); ++index) {
    const auto& sub = config.subscriptions[index];
    if (sub.sharding.enabled()) {
      // A shard's dead letters are its own, in its slot: never the two-step path.
      two_step.push_back(false);
      auto at = options;
      at.slot = keys::KeySlot(keys::ShardKey(sub.ShardKeyPattern(), 0));
      at.client_name = "streamcar:" + config.consumer_name + ":start";
      auto connection = redis::Connection::Open(at);
      if (!connection.ok()) {
        LogWarn("cannot check the slots with CLUSTER KEYSLOT now; using streamcar's own hashing",
                {{"subscription", sub.name}, {"error", connection.status().message()}});
      }
      const std::string path = "subscriptions[" + std::to_string(index) + "]";
      if (Status s = CheckShardSlots(sub, path, connection.ok() ? connection->get() : nullptr);
          !s.ok()) {
        return s;
      }
      continue;
    }
    const int stream_slot = keys::KeySlot(sub.stream);
    const int dlq_slot = keys::KeySlot(sub.dead_letter.stream);
    auto at = options;
    at.slot = stream_slot;
    at.client_name = "streamcar:" + config.consumer_name + ":start";
    auto connection = redis::Connection::Open(at);
    if (connection.ok()) {
      for (const auto& [key, slot] :
           {std::pair{sub.stream, stream_slot}, std::pair{sub.dead_letter.stream, dlq_slot}}) {
        auto reply = (*connection)->Run(redis::Command("CLUSTER").Arg("KEYSLOT").Arg(key));
        if (reply.ok() && reply->view().IsInteger() && reply->view().Integer() != slot) {
          return SlotDisagreement(sub, key, reply->view().Integer(), slot);
        }
      }
    } else {
      LogWarn("cannot check the slots with CLUSTER KEYSLOT now; using streamcar's own hashing",
              {{"subscription", sub.name}, {"error", connection.status().message()}});
    }
    two_step.push_back(stream_slot != dlq_slot);
    LogInfo("dead-letter path", {{"subscription", sub.name},
                                 {"path", stream_slot == dlq_slot ? "atomic" : "two-step"},
                                 {"stream", sub.stream},
                                 {"stream_slot", int64_t{stream_slot}},
                                 {"dead_letter_stream", sub.dead_letter.stream},
                                 {"dlq_slot", int64_t{dlq_slot}}});
  }
  return two_step;
}

}  // namespace

int Run(const config::Config& configured, const runtime::Tuning& tuning) {
  // A copy: with redis.mode auto, the default dead-letter streams are settled once the server
  // says whether it is a cluster (SPEC 8).
  config::Config config = configured;
  // Signals are taken synchronously by this thread only; every thread created below inherits
  // the mask, so no loop is ever interrupted in the middle of a request.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  RaiseOpenFileLimit();

  const auto url_options = redis::ConnectionOptionsOf(config);
  if (url_options.endpoint.kind == config::RedisEndpoint::Kind::kTls && !config.redis.tls.verify) {
    LogWarn(
        "TLS certificate verification is OFF (redis.tls.verify: false): the connection to "
        "Redis is encrypted but not authenticated, and anyone on the path can read and "
        "change it",
        {{"redis", url_options.endpoint.Describe()}});
  }

  admin::Metrics metrics;
  admin::Watchdog watchdog;
  admin::Readiness readiness;
  redis::RedisHealth redis_health;
  FatalLatch fatal(pthread_self());
  std::atomic<size_t> groups_ready{0};

  // Every labelled series exists at 0 before the first scrape (SPEC 5): each subscription's
  // families, and the trimmed counter of every stream a retention rule names.
  for (const auto& sub : config.subscriptions) metrics.ForSubscription(sub.name);
  for (const auto& rule : log::TrimRulesOf(config)) {
    metrics.Trimmed(rule.stream);
    if (rule.archive) {
      metrics.ArchiveFolded(rule.stream);
      metrics.ArchiveWatermark(rule.stream);
    }
  }

  // The archive (SPEC 10), shared by the retention beat's folders and the log API's reads.
  std::unique_ptr<log::ArchiveStore> archive;
  if (!config.archive.url.empty()) {
    // Unreachable now: opened lazily by the retention beat (and the log API) with backoff.
    auto opened = log::OpenArchiveOrRetry(config.archive.url);
    if (!opened.ok()) {
      LogError("fatal: cannot open the archive: " + opened.status().message());
      return 1;
    }
    archive = std::move(*opened);
  }

  // Declared before the admin server, which reads it (readiness) until it stops.
  std::shared_ptr<redis::Topology> topology;
  std::atomic<redis::Topology*> ready_topology{nullptr};
  admin::AdminServer admin_server({
      [&] { return watchdog.FindWedged(); },
      [&] {
        if (std::string why = NoMasterFor(config, ready_topology.load()); !why.empty()) {
          return why;
        }
        return readiness.WhyNotReady(redis_health.up());
      },
      [&] {
        metrics.redis_up().Set(redis_health.up() ? 1 : 0);
        return metrics.Serialize();
      },
  });
  if (!config.admin.listen.empty()) {
    if (Status s = admin_server.Start(config.admin.listen); !s.ok()) {
      LogError("fatal: " + s.message(), {{"listen", config.admin.listen}});
      return 1;
    }
  }

  // SPEC 8: where each key lives. An explicit standalone needs no topology (nor does a server
  // that `auto` finds standalone): every connection goes to the url, as always.
  auto redis_options = url_options;
  std::vector<bool> two_step_dead_letters(config.subscriptions.size(), false);
  if (config.redis.mode != config::RedisMode::kStandalone) {
    auto topology_options = redis::TopologyOptionsOf(config);
    topology_options.used_slots = UsedSlots(config);
    topology = std::make_shared<redis::Topology>(std::move(topology_options), &metrics);
    if (auto exit_code = ResolveTopology(*topology, signals, config.redis.connect_timeout)) {
      admin_server.Stop();
      return *exit_code;
    }
    const redis::ResolvedMode mode = *topology->mode();
    if (mode == redis::ResolvedMode::kStandalone) {
      topology.reset();
    } else {
      config::SettleDeadLetterDefaults(config, mode == redis::ResolvedMode::kCluster);
      topology->Start();
      redis_options.topology = topology;
      ready_topology.store(topology.get());
      LogInfo("redis topology", {{"mode", redis::ResolvedModeName(mode)}});
      if (mode == redis::ResolvedMode::kCluster) {
        auto two_step = CheckClusterSlots(config, redis_options);
        if (!two_step.ok()) {
          // As ResolveTopology says it: a configuration this cluster cannot serve is exit 2.
          const bool invalid = two_step.status().code() == StatusCode::kInvalid;
          LogError((invalid ? "configuration error: " : "fatal: ") + two_step.status().message(),
                   {{"exit_code", invalid ? 2 : 1}});
          admin_server.Stop();
          return invalid ? 2 : 1;
        }
        two_step_dead_letters = std::move(*two_step);
      }
    }
  }
  if (topology == nullptr) metrics.OnMastersKnown(1);

  // The log API (SPEC 10), on its own Redis sessions. A sidecar with streams and no
  // subscriptions has no groups to ensure: it is ready once Redis is.
  if (config.subscriptions.empty()) readiness.SetGroupsReady(true);
  std::unique_ptr<log::ApiServer> api_server;
  if (!config.api.listen.empty()) {
    log::ApiServerDeps api_deps;
    api_deps.redis = redis_options;
    api_deps.redis.client_name = "streamcar:" + config.consumer_name;
    api_deps.health = &redis_health;
    api_deps.metrics = &metrics;
    api_deps.archive = archive.get();  // null: streams are read from Redis only
    api_server = std::make_unique<log::ApiServer>(config.api, config.streams, api_deps);
    if (Status s = api_server->Start(); !s.ok()) {
      LogError("fatal: " + s.message(), {{"listen", config.api.listen}});
      return 1;
    }
  }

  runtime::SubscriptionDeps deps;
  deps.redis = redis_options;
  deps.redis_health = &redis_health;
  deps.metrics = &metrics;
  deps.watchdog = &watchdog;
  deps.readiness = &readiness;
  deps.consumer_name = config.consumer_name;
  deps.tuning = tuning;
  deps.reap_idle = config.consumer_reap_idle;
  deps.group_ready = [&] {
    if (++groups_ready == config.subscriptions.size()) readiness.SetGroupsReady(true);
  };
  deps.fatal = [&](const Status& status) { fatal.Report(status); };

  // A sidecar that only serves the log API (`streams` and no `subscriptions`) has no group to
  // wait for.
  if (config.subscriptions.empty()) readiness.SetGroupsReady(true);
  std::vector<std::unique_ptr<runtime::SubscriptionLoop>> subscriptions;
  // Sharded subscriptions (SPEC 9): a member each, which runs a loop per shard it holds.
  std::vector<std::unique_ptr<sharding::ShardedSubscription>> members;
  for (size_t i = 0; i < config.subscriptions.size(); ++i) {
    runtime::SubscriptionDeps sub_deps = deps;
    sub_deps.dead_letter_two_step = two_step_dead_letters[i];
    if (config.subscriptions[i].sharding.enabled()) {
      members.push_back(std::make_unique<sharding::ShardedSubscription>(
          config.subscriptions[i], sub_deps, NewMemberId(), deps.group_ready));
      continue;
    }
    subscriptions.push_back(
        std::make_unique<runtime::SubscriptionLoop>(config.subscriptions[i], sub_deps));
  }
  std::unique_ptr<log::RetentionBeat> retention;
  if (auto rules = log::TrimRulesOf(config); !rules.empty()) {
    auto options = redis_options;
    options.client_name = "streamcar:" + config.consumer_name + ":retention";
    retention = std::make_unique<log::RetentionBeat>(
        std::move(rules), std::make_unique<redis::Session>(options, "retention", &redis_health),
        &metrics, watchdog.Register("retention", redis_options.command_timeout * 2 + Millis(30000)),
        log::ArchiveDeps{archive.get(), config.consumer_name, config.archive.batch});
  }
  LogInfo("streamcar started", {{"version", kVersion},
                                {"consumer", config.consumer_name},
                                {"redis", url_options.endpoint.Describe()},
                                {"subscriptions", static_cast<int64_t>(subscriptions.size())},
                                {"admin", config.admin.listen},
                                {"api", config.api.listen}});
  for (auto& subscription : subscriptions) {
    if (Status s = subscription->Start(); !s.ok()) {
      fatal.Report(s);
      break;
    }
  }
  for (auto& member : members) {
    if (Status s = member->Start(); !s.ok()) {
      fatal.Report(s);
      break;
    }
  }
  if (retention) retention->Start();

  // Wait for a signal or a fatal error (which raises SIGUSR1 at this thread).
  int received = 0;
  while (!fatal.Get()) {
    const int signal_number = sigwaitinfo(&signals, nullptr);
    if (signal_number == SIGTERM || signal_number == SIGINT) {
      received = signal_number;
      break;
    }
  }

  readiness.SetShuttingDown();
  const auto started = SteadyClock::now();
  const auto drain_deadline = started + config.shutdown.drain_timeout;
  if (received != 0) {
    LogInfo("shutdown: draining in-flight deliveries",
            {{"signal", received == SIGTERM ? "SIGTERM" : "SIGINT"},
             {"drain_timeout_ms", static_cast<int64_t>(config.shutdown.drain_timeout.count())}});
  }
  // Every subscription stops reading at once (SPEC 4.5: nothing new is read once shutdown
  // begins), before anything that may take a while to stop: the API (its in-flight requests
  // finish, followers end) and the retention beat (a fold in progress). Only then are the
  // readers waited for.
  for (auto& subscription : subscriptions) subscription->RequestStopIntake();
  // A member drains its shards and leaves the group (SHARDING.md B7 LEAVING) meanwhile.
  for (auto& member : members) member->Leave(drain_deadline);
  if (api_server) api_server->Stop();
  if (retention) retention->StopAndJoin();
  for (auto& subscription : subscriptions) subscription->JoinIntake();
  bool all_finished = true;
  size_t left_pending_of_members = 0;
  for (auto& subscription : subscriptions)
    all_finished = subscription->WaitForDeliveries(drain_deadline) && all_finished;
  const auto settle_deadline = std::max(drain_deadline, SteadyClock::now() + runtime::kSettleFloor);
  for (auto& subscription : subscriptions) subscription->FinishSettling(settle_deadline);
  for (auto& member : members) {
    member->Join();  // it has left, or dropped what was left at drain_deadline
    left_pending_of_members += member->held();
  }
  members.clear();
  // Nothing settles any more: connections still opening give up instead of asking the servers.
  if (topology) topology->Stop();
  admin_server.Stop();

  size_t left_pending = left_pending_of_members;
  for (auto& subscription : subscriptions) left_pending += subscription->held();
  const int exit_code = fatal.Get() ? 1 : 0;
  if (auto status = fatal.Get()) {
    LogError("fatal: " + status->message(), {{"exit_code", 1}});
  } else {
    LogInfo("shutdown complete",
            {{"left_pending", static_cast<int64_t>(left_pending)},
             {"drained", all_finished},
             {"took_ms",
              static_cast<int64_t>(
                  std::chrono::duration_cast<Millis>(SteadyClock::now() - started).count())}});
  }
  // Requests still running past the deadline were given up (their connections closed): their
  // entries stay pending in Redis for a restart or a peer.
  return exit_code;
}

}  // namespace streamcar::app
