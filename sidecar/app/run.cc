#include "sidecar/app/run.h"

#include <poll.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <optional>
#include <random>
#include <vector>

#include "sidecar/admin/admin_server.h"
#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/app/config_reload.h"
#include "sidecar/app/config_watch.h"
#include "sidecar/app/dapr_subscribe.h"
#include "sidecar/app/redis_placement.h"
#include "sidecar/common/log.h"
#include "sidecar/common/unique_fd.h"
#include "sidecar/common/version.h"
#include "sidecar/log/api_server.h"
#include "sidecar/log/archive_store.h"
#include "sidecar/log/lazy_archive.h"
#include "sidecar/log/retention.h"
#include "sidecar/redis/connection.h"
#include "sidecar/runtime/subscription_loop.h"
#include "sidecar/sharding/sharded_subscription.h"
#include "sidecar/telemetry/span_exporter.h"
#include "sidecar/telemetry/tracing_observer.h"

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

// A member id of a sharded subscription (KIP-1082), or the token of this process's consumer-name
// leases (SPEC 4.7): 128 random bits, for the process's lifetime.
std::string NewMemberId() {
  std::random_device random;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 32; ++i) id += kHex[random() % 16];
  return id;
}

// Who this process is to the consumer-name leases (SPEC 4.7): a token of its own, and its
// instance: $POD_UID (the chart sets it from the pod's uid) when set, so that a restarted
// container of the same pod takes its predecessor's lease at once; else host name, process id
// and start time, which no other process shares.
redis::LeaseIdentity LeaseIdentityOfThisProcess() {
  redis::LeaseIdentity identity;
  identity.token = NewMemberId();
  if (const char* pod = std::getenv("POD_UID"); pod != nullptr && *pod != '\0') {
    identity.own_pod = pod;
    identity.instance = pod;
    return identity;
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char started[32] = {};
  std::strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%S", &utc);
  const auto millis = std::chrono::duration_cast<Millis>(now.time_since_epoch()).count() % 1000;
  char fraction[8] = {};
  std::snprintf(fraction, sizeof(fraction), ".%03dZ", static_cast<int>(millis));
  identity.instance = std::string(host) + "/" + std::to_string(getpid()) + "@" + started + fraction;
  return identity;
}

// Each subscription keeps up to handler.concurrency handler connections open besides its Redis
// connections: at concurrency 1024 that passes the usual soft limit of 1024 descriptors.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

// Everything the parts of the process share, from start-up to the last log line. The members
// are destroyed in the reverse order of their declaration: each part after the ones that use it.
struct Process {
  // A copy: with redis.mode auto, the default dead-letter streams are settled once the server
  // says whether it is a cluster (SPEC 8).
  Process(config::Config configured, const sigset_t& blocked)
      : config(std::move(configured)),
        signals(blocked),
        url_options(redis::ConnectionOptionsOf(config)) {}

  config::Config config;
  // The signals the main thread takes synchronously (SIGUSR1: a fatal error's wake-up).
  const sigset_t signals;
  redis::ConnectionOptions url_options;
  admin::Metrics metrics;
  admin::Watchdog watchdog;
  admin::Readiness readiness;
  redis::RedisHealth redis_health;
  FatalLatch fatal{pthread_self()};
  std::atomic<size_t> groups_ready{0};
  // The archive (SPEC 10), shared by the retention beat's folders and the log API's reads.
  std::unique_ptr<log::ArchiveStore> archive;
  // Declared before the admin server, which reads it (readiness) until it stops.
  RedisPlacement redis;
  std::unique_ptr<admin::AdminServer> admin_server;
  std::unique_ptr<log::ApiServer> api_server;
  // Tracing (SPEC 11): null while tracing.otlp_endpoint is "". Declared before the loops whose
  // tracers submit to it.
  std::unique_ptr<telemetry::SpanExporter> exporter;
  std::vector<std::unique_ptr<runtime::SubscriptionLoop>> subscriptions;
  // What each loop of `subscriptions` was built with (a reload builds it again), and the loop of
  // each configured subscription (kNoLoop: a sharded one).
  std::vector<runtime::SubscriptionDeps> loop_deps;
  std::vector<size_t> loop_of;
  static constexpr size_t kNoLoop = SIZE_MAX;
  // Sharded subscriptions (SPEC 9): a member each, which runs a loop per shard it holds.
  std::vector<std::unique_ptr<sharding::ShardedSubscription>> members;
  std::unique_ptr<log::RetentionBeat> retention;
};

// Signals are taken synchronously by this thread only; every thread created later inherits the
// mask, so no loop is ever interrupted in the middle of a request. Returns the signals blocked.
sigset_t BlockSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);
  sigaddset(&signals, SIGHUP);  // a reload (SPEC 2), never the end of the process
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

void WarnIfTlsUnverified(const Process& process) {
  if (process.url_options.endpoint.kind == config::RedisEndpoint::Kind::kTls &&
      !process.config.redis.tls.verify) {
    LogWarn(
        "TLS certificate verification is OFF (redis.tls.verify: false): the connection to "
        "Redis is encrypted but not authenticated, and anyone on the path can read and "
        "change it",
        {{"redis", process.url_options.endpoint.Describe()}});
  }
}

// The declared routes' series of a subscription (SPEC 11), before its loop starts.
void DeclareRoutes(Process& process, const config::Subscription& sub) {
  if (sub.routes.empty()) return;
  std::vector<bool> delivers;
  delivers.reserve(sub.routes.size());
  for (const auto& route : sub.routes) delivers.push_back(!route.drop);
  process.metrics.DeclareRoutes(sub.name, delivers);
}

// Every labelled series exists at 0 before the first scrape (SPEC 5): each subscription's
// families, and the trimmed counter of every stream a retention rule names.
void SeedMetrics(Process& process) {
  for (const auto& sub : process.config.subscriptions) {
    process.metrics.ForSubscription(sub.name);
    DeclareRoutes(process, sub);
  }
  for (const auto& rule : log::TrimRulesOf(process.config)) {
    process.metrics.Trimmed(rule.stream);
    if (rule.archive) {
      process.metrics.ArchiveFolded(rule.stream);
      process.metrics.ArchiveWatermark(rule.stream);
    }
  }
}

// False (after logging why) when the archive's url cannot be used; an archive unreachable now is
// opened lazily by the retention beat (and the log API) with backoff.
bool OpenArchive(Process& process) {
  if (process.config.archive.url.empty()) return true;
  auto opened = log::OpenArchiveOrRetry(process.config.archive.url);
  if (!opened.ok()) {
    LogError("fatal: cannot open the archive: " + opened.status().message());
    return false;
  }
  process.archive = std::move(*opened);
  return true;
}

// The admin server answers from now on (SPEC 5): liveness, readiness and metrics. False (after
// logging why) when it cannot listen.
bool StartAdmin(Process& process) {
  process.admin_server = std::make_unique<admin::AdminServer>(admin::AdminHandlers{
      [&process] { return process.watchdog.FindWedged(); },
      [&process] {
        if (std::string why = NoMasterFor(process.config, process.redis.ready_topology.load());
            !why.empty()) {
          return why;
        }
        return process.readiness.WhyNotReady(process.redis_health.up());
      },
      [&process] {
        process.metrics.redis_up().Set(process.redis_health.up() ? 1 : 0);
        return process.metrics.Serialize();
      },
  });
  if (process.config.admin.listen.empty()) return true;
  if (Status s = process.admin_server->Start(process.config.admin.listen); !s.ok()) {
    LogError("fatal: " + s.message(), {{"listen", process.config.admin.listen}});
    return false;
  }
  return true;
}

// The log API (SPEC 10), on its own Redis sessions. False (after logging why) when it cannot
// listen.
bool StartApi(Process& process) {
  const config::Config& config = process.config;
  if (config.api.listen.empty()) return true;
  log::ApiServerDeps api_deps;
  api_deps.redis = process.redis.options;
  api_deps.redis.client_name = redis::ClientName(config.consumer_name);
  api_deps.health = &process.redis_health;
  api_deps.metrics = &process.metrics;
  api_deps.archive = process.archive.get();  // null: streams are read from Redis only
  process.api_server = std::make_unique<log::ApiServer>(config.api, config.streams, api_deps);
  if (Status s = process.api_server->Start(); !s.ok()) {
    LogError("fatal: " + s.message(), {{"listen", config.api.listen}});
    return false;
  }
  return true;
}

// With tracing on: the exporter's thread, and a tracer for every loop (one per shard loop too).
void StartTracing(Process& process, runtime::SubscriptionDeps* deps) {
  const config::TracingConfig& tracing = process.config.tracing;
  if (tracing.otlp_endpoint.empty()) return;
  telemetry::ExporterOptions options;
  options.endpoint = tracing.otlp_endpoint;
  options.service_name = tracing.service_name;
  options.version = kVersion;
  prometheus::Counter* dropped = &process.metrics.spans_dropped();
  options.dropped = [dropped](size_t count) { dropped->Increment(static_cast<double>(count)); };
  process.exporter = std::make_unique<telemetry::SpanExporter>(std::move(options));
  deps->observers.emplace_back([sink = process.exporter.get(), ratio = tracing.sample_ratio](
                                   const config::Subscription& sub, const Clock& clock) {
    return std::make_unique<telemetry::TracingObserver>(sub, ratio, sink, clock);
  });
  LogInfo("tracing on",
          {{"otlp_endpoint", tracing.otlp_endpoint}, {"sample_ratio", tracing.sample_ratio}});
}

// A loop per plain subscription and a member per sharded one, with what they share.
void BuildSubscriptions(Process& process, const runtime::Tuning& tuning) {
  const config::Config& config = process.config;
  runtime::SubscriptionDeps deps;
  deps.redis = process.redis.options;
  deps.redis_health = &process.redis_health;
  deps.metrics = &process.metrics;
  deps.watchdog = &process.watchdog;
  deps.readiness = &process.readiness;
  deps.consumer_name = config.consumer_name;
  deps.tuning = tuning;
  deps.reap_idle = config.consumer_reap_idle;
  deps.wait_for_name = config.consumer_wait_for_name;
  const redis::LeaseIdentity lease_identity = LeaseIdentityOfThisProcess();
  deps.group_ready = [&process] {
    if (++process.groups_ready == process.config.subscriptions.size()) {
      process.readiness.SetGroupsReady(true);
    }
  };
  deps.fatal = [&process](const Status& status) { process.fatal.Report(status); };
  StartTracing(process, &deps);

  for (size_t i = 0; i < config.subscriptions.size(); ++i) {
    runtime::SubscriptionDeps sub_deps = deps;
    sub_deps.dead_letter_two_step = process.redis.two_step_dead_letters[i];
    if (config.subscriptions[i].sharding.enabled()) {
      process.loop_of.push_back(Process::kNoLoop);
      process.members.push_back(std::make_unique<sharding::ShardedSubscription>(
          config.subscriptions[i], sub_deps, NewMemberId(), deps.group_ready));
      continue;
    }
    // A plain subscription holds its consumer name's lease (SPEC 4.7); a sharded one's members
    // have ids of their own, and the coordinator gives each shard to one of them.
    sub_deps.consumer_lease = lease_identity;
    process.loop_of.push_back(process.subscriptions.size());
    process.loop_deps.push_back(sub_deps);
    process.subscriptions.push_back(
        std::make_unique<runtime::SubscriptionLoop>(config.subscriptions[i], sub_deps));
  }
}

// The retention beat (SPEC 4.4, 10), when a stream has a retention rule.
void BuildRetention(Process& process) {
  const config::Config& config = process.config;
  auto rules = log::TrimRulesOf(config);
  if (rules.empty()) return;
  const redis::ConnectionOptions& redis_options = process.redis.options;
  auto options = redis_options;
  options.client_name = redis::ClientName(config.consumer_name, {"retention"});
  process.retention = std::make_unique<log::RetentionBeat>(
      std::move(rules),
      std::make_unique<redis::Session>(options, "retention", &process.redis_health),
      &process.metrics,
      process.watchdog.Register("retention",
                                admin::Watchdog::LimitFor(redis_options.command_timeout)),
      log::ArchiveDeps{process.archive.get(), config.consumer_name, config.archive.batch});
}

void StartAll(Process& process) {
  LogInfo("streamcar started",
          {{"version", kVersion},
           {"consumer", process.config.consumer_name},
           {"redis", process.url_options.endpoint.Describe()},
           {"subscriptions", static_cast<int64_t>(process.subscriptions.size())},
           {"admin", process.config.admin.listen},
           {"api", process.config.api.listen}});
  for (auto& subscription : process.subscriptions) {
    if (Status s = subscription->Start(); !s.ok()) {
      process.fatal.Report(s);
      break;
    }
  }
  for (auto& member : process.members) {
    if (Status s = member->Start(); !s.ok()) {
      process.fatal.Report(s);
      break;
    }
  }
  if (process.retention) process.retention->Start();
}

// The deliveries in flight of `loops` finish (or are given up at `deadline`) and settle, the
// settling given at least kSettleFloor; at shutdown and at a reload alike. True when every loop's
// deliveries finished.
bool FinishDeliveries(const std::vector<runtime::SubscriptionLoop*>& loops, SteadyTime deadline) {
  bool all_finished = true;
  for (auto* loop : loops) all_finished = loop->WaitForDeliveries(deadline) && all_finished;
  const auto settle_deadline = std::max(deadline, SteadyClock::now() + runtime::kSettleFloor);
  for (auto* loop : loops) loop->FinishSettling(settle_deadline);
  return all_finished;
}

// How long past handler.timeout a reload waits for the timed-out request's outcome to reach its
// loop (the client's timer fires on the loop's next turn).
constexpr Millis kAnswerGrace{1000};

// A reload's live changes (SPEC 2): each subscription they touch gets a new loop. The old one
// stops as at shutdown (no new reads, the requests in flight finish, their outcomes settle); what
// it read and did not settle stays pending under the same consumer name, and the new loop
// delivers it first (at-least-once). The log level and shutdown.drain_timeout apply at once and
// touch no loop.
void ApplyLive(Process& process, const LiveChanges& live) {
  process.config.shutdown = live.next.shutdown;
  process.config.log = live.next.log;
  SetLogLevel(process.config.log.level);
  std::vector<size_t> restarted;
  for (size_t index : SubscriptionsChanged(live.changes)) {
    if (process.loop_of[index] != Process::kNoLoop) restarted.push_back(index);
  }
  auto loop = [&process](size_t index) -> auto& {
    return process.subscriptions[process.loop_of[index]];
  };
  // A reload gives no request up: each in flight ends with its answer or at its own
  // handler.timeout, and its outcome settles. Given up at a shorter shutdown.drain_timeout, the
  // new loop would send it again while the first request still runs, and a later reload would
  // count both as attempts without an outcome (dead-lettering entries the handler took).
  Millis drain = process.config.shutdown.drain_timeout;
  for (size_t index : restarted) {
    drain = std::max(drain, process.config.subscriptions[index].handler.timeout + kAnswerGrace);
  }
  std::vector<runtime::SubscriptionLoop*> stopping;
  stopping.reserve(restarted.size());
  for (size_t index : restarted) stopping.push_back(loop(index).get());
  for (auto* old : stopping) old->RequestStopIntake();
  for (auto* old : stopping) old->JoinIntake();
  FinishDeliveries(stopping, SteadyClock::now() + drain);
  for (size_t index : restarted) {
    loop(index).reset();
    config::Subscription& sub = process.config.subscriptions[index];
    config::TakeLiveKeys(live.next.subscriptions[index], &sub);
    DeclareRoutes(process, sub);
    loop(index) =
        std::make_unique<runtime::SubscriptionLoop>(sub, process.loop_deps[process.loop_of[index]]);
    if (Status s = loop(index)->Start(); !s.ok()) process.fatal.Report(s);
  }
  if (RetentionChanged(live.changes)) {
    if (process.retention) process.retention->StopAndJoin();
    process.retention.reset();
    BuildRetention(process);
    for (const auto& rule : log::TrimRulesOf(process.config)) process.metrics.Trimmed(rule.stream);
    if (process.retention) process.retention->Start();
  }
}

// The next signal of process.signals from its signalfd, or 0 when none is waiting.
int TakeSignal(int signal_fd) {
  signalfd_siginfo info{};
  const ssize_t got = read(signal_fd, &info, sizeof(info));
  return got == static_cast<ssize_t>(sizeof(info)) ? static_cast<int>(info.ssi_signo) : 0;
}

// Waits for SIGTERM or SIGINT (returned) or a fatal error (which raises SIGUSR1 at this thread;
// 0 is returned). SIGHUP, or a change of the configuration file, reloads it (SPEC 2). One thread
// for both: the signals are read from a signalfd polled beside the file's watch.
int WaitForSignalOrFatal(Process& process, ConfigReloader& reloader, ConfigWatch* watch) {
  const UniqueFd signal_fd(signalfd(-1, &process.signals, SFD_NONBLOCK | SFD_CLOEXEC));
  const auto reload = [&](ConfigReloader::Cause cause) {
    if (process.fatal.Get()) return;
    if (auto live = reloader.Read(cause)) {
      ApplyLive(process, *live);
      reloader.Applied(std::move(*live));
    }
  };
  reload(ConfigReloader::Cause::kStarted);
  while (!process.fatal.Get()) {
    std::array<pollfd, 2> fds{pollfd{signal_fd.get(), POLLIN, 0},
                              pollfd{watch ? watch->fd() : -1, POLLIN, 0}};
    const int timeout = watch ? watch->PollTimeoutMs(SteadyClock::now()) : -1;
    int signal_number = 0;
    if (signal_fd.get() < 0) {  // no descriptor to spare: signals only
      signal_number = sigwaitinfo(&process.signals, nullptr);
    } else if (poll(fds.data(), fds.size(), timeout) > 0 && fds[0].revents != 0) {
      signal_number = TakeSignal(signal_fd.get());
    }
    if (signal_number == SIGTERM || signal_number == SIGINT) return signal_number;
    if (signal_number == SIGHUP) reload(ConfigReloader::Cause::kSignal);
    if (watch && fds[1].revents != 0) watch->OnReadable(SteadyClock::now());
    if (watch && watch->Due(SteadyClock::now())) reload(ConfigReloader::Cause::kFileChanged);
  }
  return 0;
}

// The watch of the configuration file (SPEC 2): null when inotify cannot watch it (logged;
// SIGHUP still reloads).
std::unique_ptr<ConfigWatch> WatchConfigFile(const Process& process) {
  auto watch = ConfigWatch::Open(process.config.source_file);
  if (!watch.ok()) {
    LogWarn("the configuration file is not watched; SIGHUP reloads it",
            {{"error", watch.status().message()}});
    return nullptr;
  }
  return std::move(*watch);
}

// Shutdown's first stage. Every subscription stops reading at once (SPEC 4.5: nothing new is read
// once shutdown begins), before anything that may take a while to stop: the API (its in-flight
// requests finish, followers end) and the retention beat (a fold in progress). Only then are the
// readers waited for.
void StopReading(Process& process, SteadyTime drain_deadline) {
  for (auto& subscription : process.subscriptions) subscription->RequestStopIntake();
  // A member drains its shards and leaves the group (SHARDING.md B7 LEAVING) meanwhile.
  for (auto& member : process.members) member->Leave(drain_deadline);
  if (process.api_server) process.api_server->Stop();
  if (process.retention) process.retention->StopAndJoin();
  for (auto& subscription : process.subscriptions) subscription->JoinIntake();
}

// Shutdown's second stage: the deliveries in flight finish (or are given up at drain_deadline)
// and settle. True when every plain subscription's deliveries finished; *left_pending counts the
// entries the members still held.
bool DrainDeliveries(Process& process, SteadyTime drain_deadline, size_t* left_pending) {
  std::vector<runtime::SubscriptionLoop*> loops;
  loops.reserve(process.subscriptions.size());
  for (auto& subscription : process.subscriptions) loops.push_back(subscription.get());
  const bool all_finished = FinishDeliveries(loops, drain_deadline);
  for (auto& member : process.members) {
    member->Join();  // it has left, or dropped what was left at drain_deadline
    *left_pending += member->held();
  }
  process.members.clear();
  return all_finished;
}

// At shutdown the exporter gets at least this long to send the spans of the last deliveries.
constexpr Millis kSpanFlushFloor{1000};

// Stops every part in stages after `received` (0: a fatal error) and returns the exit code.
int ShutDown(Process& process, int received) {
  process.readiness.SetShuttingDown();
  const auto started = SteadyClock::now();
  const auto drain_deadline = started + process.config.shutdown.drain_timeout;
  if (received != 0) {
    LogInfo("shutdown: draining in-flight deliveries",
            {{"signal", received == SIGTERM ? "SIGTERM" : "SIGINT"},
             {"drain_timeout_ms",
              static_cast<int64_t>(process.config.shutdown.drain_timeout.count())}});
  }
  StopReading(process, drain_deadline);
  size_t left_pending = 0;
  const bool all_finished = DrainDeliveries(process, drain_deadline, &left_pending);
  // The spans of the last deliveries go out within the drain, or within a second past it when
  // the deliveries took all of it.
  if (process.exporter) {
    process.exporter->Shutdown(std::max(drain_deadline, SteadyClock::now() + kSpanFlushFloor));
  }
  // Nothing settles any more: connections still opening give up instead of asking the servers.
  if (process.redis.topology) process.redis.topology->Stop();
  process.admin_server->Stop();

  for (auto& subscription : process.subscriptions) left_pending += subscription->held();
  const int exit_code = process.fatal.Get() ? 1 : 0;
  if (auto status = process.fatal.Get()) {
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

}  // namespace

// The start-up story: each step either goes on or ends the process with its exit code.
int Run(const config::Config& configured, const runtime::Tuning& tuning) {
  // The file's log.level (or $STREAMCAR_LOG_LEVEL it fell back to) before the first line logged.
  SetLogLevel(configured.log.level);
  // Before anything that may start a thread.
  const sigset_t signals = BlockSignals();
  RaiseOpenFileLimit();
  Process process(configured, signals);
  WarnIfTlsUnverified(process);
  SeedMetrics(process);
  if (!OpenArchive(process)) return 1;
  if (!StartAdmin(process)) return 1;
  // Before Redis is placed: a declared dead-letter topic is a key whose slot placement checks.
  if (auto exit_code = ResolveDaprRoutes(&process.config, process.signals)) {
    process.admin_server->Stop();
    return *exit_code;
  }
  if (auto exit_code = PlaceRedis(process.config, process.url_options, process.signals,
                                  process.metrics, process.redis)) {
    process.admin_server->Stop();
    return *exit_code;
  }
  // A sidecar that only serves the log API (`streams` and no `subscriptions`) has no group to
  // wait for: it is ready once Redis is.
  if (process.config.subscriptions.empty()) process.readiness.SetGroupsReady(true);
  if (!StartApi(process)) return 1;
  BuildSubscriptions(process, tuning);
  BuildRetention(process);
  StartAll(process);
  ConfigReloader reloader(configured, &process.metrics);
  const auto watch = WatchConfigFile(process);
  return ShutDown(process, WaitForSignalOrFatal(process, reloader, watch.get()));
}

}  // namespace streamcar::app
