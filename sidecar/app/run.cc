#include "sidecar/app/run.h"

#include <prometheus/gauge.h>
#include <pthread.h>
#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "sidecar/admin/admin_server.h"
#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/common/log.h"
#include "sidecar/common/version.h"
#include "sidecar/log/api_server.h"
#include "sidecar/log/archive_store.h"
#include "sidecar/log/lazy_archive.h"
#include "sidecar/runtime/retention.h"
#include "sidecar/runtime/subscription_loop.h"

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

// Each subscription keeps up to handler.concurrency handler connections open besides its Redis
// connections: at concurrency 1024 that passes the usual soft limit of 1024 descriptors.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

int Run(const config::Config& config, const runtime::Tuning& tuning) {
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

  const auto redis_options = redis::ConnectionOptionsOf(config);
  if (redis_options.endpoint.kind == config::RedisEndpoint::Kind::kTls &&
      !config.redis.tls.verify) {
    LogWarn(
        "TLS certificate verification is OFF (redis.tls.verify: false): the connection to "
        "Redis is encrypted but not authenticated, and anyone on the path can read and "
        "change it",
        {{"redis", redis_options.endpoint.Describe()}});
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
  for (const auto& rule : runtime::TrimRulesOf(config)) {
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

  admin::AdminServer admin_server({
      [&] { return watchdog.FindWedged(); },
      [&] { return readiness.WhyNotReady(redis_health.up()); },
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
  deps.consumer_name = config.consumer_name;
  deps.tuning = tuning;
  deps.group_ready = [&] {
    if (++groups_ready == config.subscriptions.size()) readiness.SetGroupsReady(true);
  };
  deps.fatal = [&](const Status& status) { fatal.Report(status); };

  // A sidecar that only serves the log API (`streams` and no `subscriptions`) has no group to
  // wait for.
  if (config.subscriptions.empty()) readiness.SetGroupsReady(true);
  std::vector<std::unique_ptr<runtime::SubscriptionLoop>> subscriptions;
  for (const auto& sub : config.subscriptions) {
    subscriptions.push_back(std::make_unique<runtime::SubscriptionLoop>(sub, deps));
  }
  std::unique_ptr<runtime::RetentionBeat> retention;
  if (auto rules = runtime::TrimRulesOf(config); !rules.empty()) {
    auto options = redis_options;
    options.client_name = "streamcar:" + config.consumer_name + ":retention";
    retention = std::make_unique<runtime::RetentionBeat>(
        std::move(rules), std::make_unique<redis::Session>(options, "retention", &redis_health),
        &metrics, watchdog.Register("retention", redis_options.command_timeout * 2 + Millis(30000)),
        runtime::ArchiveDeps{archive.get(), config.consumer_name, config.archive.batch});
  }
  LogInfo("streamcar started", {{"version", kVersion},
                                {"consumer", config.consumer_name},
                                {"redis", redis_options.endpoint.Describe()},
                                {"subscriptions", static_cast<int64_t>(subscriptions.size())},
                                {"admin", config.admin.listen},
                                {"api", config.api.listen}});
  for (auto& subscription : subscriptions) {
    if (Status s = subscription->Start(); !s.ok()) {
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
  if (api_server) api_server->Stop();
  if (retention) retention->StopAndJoin();
  for (auto& subscription : subscriptions) subscription->JoinIntake();
  bool all_finished = true;
  for (auto& subscription : subscriptions)
    all_finished = subscription->WaitForDeliveries(drain_deadline) && all_finished;
  // Settling gets what is left of the drain time, and at least a moment to flush acks.
  const auto settle_deadline = std::max(drain_deadline, SteadyClock::now() + Millis(2000));
  for (auto& subscription : subscriptions) subscription->FinishSettling(settle_deadline);
  admin_server.Stop();

  size_t left_pending = 0;
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
