#include "sidecar/runtime/subscription_loop.h"

#include <prometheus/gauge.h>
#include <pthread.h>

#include <algorithm>
#include <memory>
#include <span>
#include <utility>

#include "sidecar/common/log.h"
#include "sidecar/delivery/handler_setup.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/redis/async_connection.h"
#include "sidecar/redis/connector.h"
#include "sidecar/redis/consumer_reaping.h"
#include "sidecar/redis/group_info.h"
#include "sidecar/redis/settle_scripts.h"
#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/cadences.h"
#include "sidecar/runtime/consumer_lease_gate.h"
#include "sidecar/runtime/consumer_lease_link.h"
#include "sidecar/runtime/consumer_reaper.h"
#include "sidecar/runtime/delivery_gates.h"
#include "sidecar/runtime/delivery_pump.h"
#include "sidecar/runtime/entry_ledger.h"
#include "sidecar/runtime/entry_source.h"
#include "sidecar/runtime/gauges.h"
#include "sidecar/runtime/handler_gates.h"
#include "sidecar/runtime/health_probe.h"
#include "sidecar/runtime/intake.h"
#include "sidecar/runtime/metrics_observer.h"
#include "sidecar/runtime/ownership.h"
#include "sidecar/runtime/plain_ownership.h"
#include "sidecar/runtime/settle_refusal.h"
#include "sidecar/runtime/settlement.h"

namespace streamcar::runtime {
namespace {

constexpr Millis kWatchdogBeat = cadence::kWatchdogBeat;

// The loop's ownership: the one it was given, else a plain subscription's.
const Ownership& OwnershipOf(const SubscriptionDeps& deps) {
  if (deps.ownership) return *deps.ownership;
  return PlainOwnership::Instance();
}

// Consumer reaping (SPEC 4.6) is on: consumer.reap_idle set, where the ownership allows it.
bool Reaps(const SubscriptionDeps& deps) {
  return deps.reap_idle.count() > 0 && OwnershipOf(deps).MayReapConsumers();
}

// The scripts the read connection loads after each connect. A shard's reads are scripts; plain
// reads are none (the start-up drain's keepalive loads the settle scripts on a NOSCRIPT), but a
// loop that reaps loads the reap script, so that a pass needs no NOSCRIPT round trip first.
std::span<const redis::Script* const> ReadScripts(const redis::SubscriptionOps& ops,
                                                  const SubscriptionDeps& deps) {
  if (ops.EveryStepIsAScript()) return ops.Scripts();
  if (Reaps(deps)) return redis::ReapScripts();
  return {};
}

// The options of one of the subscription's connections: named for CLIENT LIST, and (cluster,
// sentinel) sent to the master of the stream's slot.
redis::ConnectionOptions ForStream(redis::ConnectionOptions options, const std::string& stream,
                                   std::string name) {
  options.client_name = std::move(name);
  options.slot = keys::KeySlot(stream);
  return options;
}

}  // namespace

// Everything the loop thread owns, in construction order (destroyed in reverse: the parts that
// call into others go first).
class SubscriptionLoop::Core {
 public:
  struct Stages {
    std::function<void()> intake_stopped;
    std::function<void()> deliveries_done;
    std::function<void()> settled;
  };

  Core(EventLoop& loop, const config::Subscription& sub, const SubscriptionDeps& deps,
       std::atomic<size_t>* held, ProgressReport* progress, Stages stages,
       std::unique_ptr<delivery::HandlerClient> client)
      : sub_(sub),
        deps_(deps),
        clock_(loop.clock()),
        metrics_(deps.subscription_metrics != nullptr ? *deps.subscription_metrics
                                                      : deps.metrics->ForSubscription(sub.name)),
        held_(held),
        stages_(std::move(stages)),
        ownership_(OwnershipOf(deps)),
        ops_(ownership_.MakeOps(sub, deps.consumer_name)),
        connector_(loop),
        read_(loop, connector_, ForStream(deps.redis, sub.stream, Prefix() + ":read"),
              sub.name + "/read", deps.redis_health, ReadScripts(*ops_, deps)),
        command_(loop, connector_, ForStream(deps.redis, sub.stream, Prefix() + ":settle"),
                 sub.name + "/settle", deps.redis_health, ops_->Scripts()),
        dead_letters_(DeadLetterConnection(loop)),
        lease_(ConsumerLeaseLink::ForSubscription(loop, &command_, sub, ops_->consumer(), deps,
                                                  LeaseCallbacks())),
        ledger_(CapacityFor(sub), sub.ordering.key_field, sub.handler.max_held_bytes),
        settlement_(sub, *ops_, &ledger_, &observers_, clock_),
        router_(
            sub.name, delivery::OutcomePolicyOf(sub), &ledger_,
            IntakeSettlement{[this](std::string id) { settlement_.QueueAck(std::move(id), false); },
                             [this](std::string id, redis::DeadLetterMeta meta) {
                               settlement_.QueueDeadLetter(std::move(id), std::move(meta));
                             }},
            &observers_, clock_),
        client_(std::move(client)),
        pump_(sub, &ledger_, &settlement_, client_.get(), &gates_, &observers_, clock_,
              [this] { Kick(); }),
        reaper_(MakeReaper()),
        intake_(MakeSource(loop)),
        gauges_(*ops_, &metrics_, clock_),
        watchdog_(deps.watchdog->Register(
            sub.name + ownership_.LoopNameSuffix() + "/loop",
            admin::Watchdog::LimitFor(std::max(sub.handler.timeout, deps.redis.command_timeout)))),
        settle_timer_(loop.CreateTimer([this] { Kick(); })),
        pause_timer_(loop.CreateTimer([this] { Kick(); })),
        beat_timer_(loop.CreateTimer([this] { Beat(); })),
        gauge_timer_(loop.CreateTimer([this] { RefreshGauges(); })),
        finish_timer_(loop.CreateTimer([this] { FinishNow(); })),
        confirm_timer_(loop.CreateTimer([this] { Kick(false); })) {
    for (const auto& make : deps.observers) {
      extra_observers_.push_back(make(sub, clock_));
      observers_.Add(extra_observers_.back().get());
    }
    health_ = AddDeliveryGates(
        loop, sub, deps.gates, deps.rate_limit, client_.get(), &observers_, [this] { Kick(); },
        &gates_);
    if (lease_) gates_.Add(std::make_unique<ConsumerLeaseGate>(&lease_->lease()));
    command_.OnReady([this] {
      settlement_.OnConnectionReady();
      if (lease_) lease_->Send();
      Kick();
    });
    command_.OnFatal([this](const Status& status) { deps_.fatal(status); });
    if (dead_letters_) {
      settlement_.UseTwoStepDeadLetters(/*cluster_map=*/deps_.redis.topology != nullptr);
      dead_letters_->OnReady([this] {
        settlement_.OnDeadLetterConnectionReady();
        CheckDeadLetterType();
        Kick();
      });
      dead_letters_->OnFatal([this](const Status& status) { deps_.fatal(status); });
    }
    settlement_.SetAckLinger(deps.tuning.ack_linger);
    intake_->SetReadLinger(deps.tuning.read_linger);
    if (deps.dead_letter_two_step) intake_->SkipDeadLetterTypeCheck();
    if (ownership_.OneLaneWithoutKeyField() && sub.ordering.key_field.empty()) {
      ledger_.OrderAllInOneLane();
    }
    if (auto stamp = ownership_.RequestStamp()) pump_.ShardedBy(*stamp);
    if (ownership_.ReportsProgress()) {
      settlement_.ReportProgressTo(progress);
      gauges_.ReportProgressTo(progress);
    }
  }

  ~Core() { watchdog_->Retire(); }

  void Start() {
    if (health_) health_->Start();
    pump_.UpdatePause();                         // intake reads by it from the start
    lease_ ? lease_->Send() : intake_->Start();  // a consumer-name lease first (SPEC 4.7)
    Beat();
    gauge_timer_->ArmIn(Millis(0));
  }

  // --- Shutdown stages (on the loop) ---
  void StopIntake() {
    stopping_ = true;
    if (lease_) lease_->Stop();
    ledger_.StopIntake();
    settlement_.BeginDraining();
    if (health_) health_->Stop();
    intake_->Stop([this] { stages_.intake_stopped(); });
    Kick();
  }

  void AwaitDeliveries() {
    if (deliveries_done_) return;
    awaiting_deliveries_ = true;
    Kick();
  }

  // Past the drain deadline: the requests still out are given up (their entries stay pending).
  void AbandonDeliveries() {
    client_->Abandon();
    if (!deliveries_done_) {
      awaiting_deliveries_ = false;
      deliveries_done_ = true;
      stages_.deliveries_done();
    }
  }

  void Finish(SteadyTime deadline) {
    if (finishing_) return;
    finishing_ = true;
    finish_timer_->ArmAt(deadline);
    Kick();
  }

  // Every event ends here. `read`: let intake read if there is room (not from inside intake).
  void Kick(bool read = true) {
    if (lost_) return CheckStages();
    pump_.Pump();
    FlushSettlement();
    if (read && !stopping_) intake_->Poke();
    ArmTimers();
    held_->store(ledger_.held(), std::memory_order_relaxed);
    gauges_.SetInflight(ledger_.held());
    CheckStages();
  }

  // The stream's owner refused a step (a shard's fence: a newer owner holds it), or another
  // process holds the consumer name (SPEC 4.7). What this loop holds belongs to the newer owner
  // now: nothing more is read, delivered, acknowledged or undone (every such step would be
  // refused too, or race the owner's); requests in flight are abandoned; whoever granted the
  // ownership ends the loop (a lease: the process exits 1 naming the holder).
  void OwnershipLost(int64_t installed, std::string_view op) {
    StopAsLost([&] { ownership_.Lost(installed, op); });
  }
  void StopAsLost(const std::function<void()>& tell) {
    if (lost_) return;
    lost_ = true;
    stopping_ = true;
    ledger_.StopIntake();
    client_->Abandon();
    tell();
    CheckStages();
  }

 private:
  // The shutdown stages that wait for something: deliveries done, settling done.
  void CheckStages() {
    if (awaiting_deliveries_ && (lost_ || ledger_.in_flight() == 0)) {
      awaiting_deliveries_ = false;
      deliveries_done_ = true;
      stages_.deliveries_done();
    }
    if (finishing_ && !undoing_ && (lost_ || settlement_.Idle())) FinishNow();
  }

  std::string Prefix() const { return redis::ClientName(deps_.consumer_name, {sub_.name}); }

  // A settlement plan may go out now: none in flight, the connection up, no gauge batch ahead of
  // it (a slow lag count must not push a plan past its deadline), not past the finish.
  // And the consumer-name lease usable (SPEC 4.7): after a freeze, not before a renewal.
  bool CanSettle() const {
    return !settling_ && !gauging_ && !undoing_ && command_.ready() &&
           (!lease_ || lease_->lease().UsableAt(clock_.Now()));
  }

  ConsumerLeaseLink::Callbacks LeaseCallbacks() {
    // Taken: intake starts (the Kick that follows opens the pause it reads by).
    return {[this] { intake_->Start(); },
            [this](const Status& why) { StopAsLost([&] { deps_.fatal(why); }); },
            [this] { Kick(); }};
  }

  // The last step of a clean stop: the lease released (its next holder need not wait), done.
  void Settled() {
    lease_ ? lease_->Release([this] { stages_.settled(); }) : stages_.settled();
  }

  // The entry source the ownership makes of the loop's parts.
  std::unique_ptr<EntrySource> MakeSource(EventLoop& loop) {
    EntrySource::Callbacks callbacks{
        deps_.group_ready, deps_.fatal,
        [this](redis::AckMode mode) { settlement_.SetAckMode(mode); },
        // Inside the intake's own read callback: everything but another read.
        [this] { Kick(/*read=*/false); },
        [this](int64_t installed, std::string_view op) { OwnershipLost(installed, op); },
        /*drained=*/nullptr};
    return ownership_.MakeSource(SourceParts{loop, sub_, *ops_, &read_, &command_, &ledger_,
                                             &router_, &metrics_, std::move(callbacks),
                                             reaper_.get()});
  }

  // Consumer reaping (SPEC 4.6), when Reaps(deps): handed to the entry source.
  std::unique_ptr<ConsumerReaper> MakeReaper() {
    if (!Reaps(deps_)) return nullptr;
    return std::make_unique<ConsumerReaper>(
        sub_.name, sub_.stream, sub_.group, ops_->consumer(), deps_.reap_idle,
        clock_.Now() + ConsumerReaper::FirstPassOffsetForProcess(), metrics_.consumers_reaped);
  }

  // Two-step dead letters only: the connection to the dead-letter stream's slot (SPEC 8).
  std::unique_ptr<redis::AsyncConnection> DeadLetterConnection(EventLoop& loop) {
    if (!deps_.dead_letter_two_step) return nullptr;
    // The dead-letter stream's slot: ForStream names the key the connection serves.
    redis::ConnectionOptions options =
        ForStream(deps_.redis, sub_.dead_letter.stream, Prefix() + ":dlq");
    return std::make_unique<redis::AsyncConnection>(loop, connector_, std::move(options),
                                                    sub_.name + "/dlq", deps_.redis_health,
                                                    std::span<const redis::Script* const>());
  }

  // Two-step dead letters: the dead-letter key lives on another node than the intake's setup
  // reads (SPEC 3.3 there), so its type is checked on its own connection, once it has answered.
  // Until then a key of another type only fails the writes (definite, tried again).
  void CheckDeadLetterType() {
    if (dead_letter_type_checked_) return;
    dead_letters_->Send(
        redis::TypeOf(sub_.dead_letter.stream), [this](StatusOr<redis::Reply> reply) {
          StatusOr<std::string> type =
              reply.ok() ? redis::ParseType(reply->view()) : StatusOr<std::string>(reply.status());
          if (!type.ok()) {
            // Asked again when the connection is next ready; meanwhile the writes say why.
            LogWarn("cannot check the dead-letter stream's type now",
                    {{"subscription", sub_.name}, {"error", type.status().message()}});
            return;
          }
          dead_letter_type_checked_ = true;
          if (Status wrong = redis::CheckDeadLetterType(sub_.name, sub_.dead_letter.stream, *type);
              !wrong.ok()) {
            deps_.fatal(wrong);
          }
        });
  }

  // Two-step dead letters: their XADDs go out on their own connection, whatever the stream's
  // connection is doing (a WAIT there never holds up the acknowledgements).
  void FlushDeadLetterWrites() {
    if (!dead_letters_ || !dead_letters_->ready() || undoing_) return;
    auto plan = settlement_.TakeDeadLetterWrites(clock_.Now(), dead_letters_->KnownReplicas());
    if (!plan) return;
    auto shared = std::make_shared<SettlePlan>(std::move(*plan));
    dead_letters_->SendBatch(
        shared->commands, deps_.redis.command_timeout + Settlement::kReplicaWait,
        [this, shared](const redis::BatchResult& result) {
          if (lost_) return;
          settlement_.ApplyDeadLetterWrites(*shared, result, clock_.Now(),
                                            dead_letters_->KnownReplicas());
          if (settlement_.TakeDeadLetterMasterDemoted()) {
            dead_letters_->FollowDemotedMaster("ROLE or WAIT says the node is a replica now");
          }
          if (settlement_.TakeRecoveryRequest()) intake_->RequestRecovery();
          Kick();
        });
  }

  void FlushSettlement() {
    FlushDeadLetterWrites();
    if (!CanSettle()) return;
    auto plan = settlement_.TakeDue(clock_.Now());
    if (!plan) return;
    settling_ = true;
    auto shared = std::make_shared<SettlePlan>(std::move(*plan));
    command_.SendBatch(shared->commands, deps_.redis.command_timeout,
                       [this, shared](const redis::BatchResult& result) {
                         settling_ = false;
                         if (auto refused = RefusedIn(*ops_, *shared, result)) {
                           return OwnershipLost(refused->installed, refused->op);
                         }
                         if (lost_) return;
                         settlement_.Apply(*shared, result, clock_.Now());
                         if (settlement_.TakeRecoveryRequest()) intake_->RequestRecovery();
                         if (settlement_.TakeGroupMissing()) intake_->RequestGroupRecreation();
                         Kick();
                       });
  }

  void ArmTimers() {
    const SteadyTime now = clock_.Now();
    // Only while a plan could be sent: with the connection down its OnReady kicks again, and a
    // timer armed at a due time it cannot serve would spin the loop.
    std::optional<SteadyTime> settle_at;
    if (CanSettle()) settle_at = settlement_.NextDue(now);
    if (settle_at) {
      settle_timer_->ArmAt(std::max(*settle_at, now));
    } else {
      settle_timer_->Cancel();
    }
    // Two-step writes after a backoff, and held letters' WAIT, but only while their connection
    // is up: its readiness writes held letters again and kicks the writes instead.
    std::optional<SteadyTime> confirm_at;
    if (dead_letters_ && dead_letters_->ready() && !undoing_) {
      confirm_at = settlement_.DeadLetterWritesDueAt();
    }
    if (confirm_at) {
      confirm_timer_->ArmAt(std::max(*confirm_at, now));
    } else {
      confirm_timer_->Cancel();
    }
    if (auto ends = ledger_.DeliveryResumesAt(); ends && *ends > now) {
      pause_timer_->ArmAt(*ends);
    } else {
      pause_timer_->Cancel();
    }
  }

  void Beat() {
    watchdog_->Beat();
    beat_timer_->ArmIn(kWatchdogBeat);
  }

  // The gauge beat (runtime/gauges.h): one batch at a time, Apply once for each.
  void RefreshGauges() {
    if (gauging_) return;
    if (!command_.ready() || settling_) {
      // Soon after the connection is up, or after the settlement plan in flight: a gauge batch
      // never shares the connection's deadline with a plan.
      gauge_timer_->ArmIn(Millis(settling_ ? 50 : 500));
      return;
    }
    auto commands = gauges_.Commands(clock_.Now());
    if (commands.empty()) {
      gauge_timer_->ArmAt(gauges_.NextDue());
      return;
    }
    gauging_ = true;
    command_.SendBatch(commands, deps_.redis.command_timeout,
                       [this](const redis::BatchResult& result) {
                         gauging_ = false;
                         gauges_.Apply(result.replies, clock_.Now());
                         gauge_timer_->ArmAt(gauges_.NextDue());
                         Kick();  // a plan may have waited for the gauges
                       });
  }

  // The settlement is idle, or the settle deadline passed: take back the delivery count of
  // entries never POSTed, then the stage is done.
  void FinishNow() {
    if (!finishing_ || undoing_) return;
    undoing_ = true;
    finish_timer_->Cancel();
    settle_timer_->Cancel();
    confirm_timer_->Cancel();
    if (lost_) {
      stages_.settled();  // a newer owner holds the stream: nothing here is ours to undo
      return;
    }
    settlement_.LogUnsettled();
    auto plan = settlement_.UndoPlan();
    if (!plan) return Settled();
    auto shared = std::make_shared<SettlePlan>(std::move(*plan));
    command_.SendBatch(shared->commands, deps_.redis.command_timeout,
                       [this, shared](const redis::BatchResult& result) {
                         settlement_.ApplyUndo(*shared, result);
                         Settled();
                       });
  }

  const config::Subscription& sub_;
  const SubscriptionDeps& deps_;
  const Clock& clock_;
  admin::SubscriptionMetrics& metrics_;
  // Who hears of each attempt and settlement (attempt_observer.h): the Prometheus series, and
  // whatever else SubscriptionDeps::observers made (the tracer).
  MetricsObserver metrics_observer_{&metrics_};
  std::vector<std::unique_ptr<AttemptObserver>> extra_observers_;
  AttemptObservers observers_{&metrics_observer_};
  std::atomic<size_t>* held_;
  Stages stages_;
  const Ownership& ownership_;
  std::unique_ptr<redis::SubscriptionOps> ops_;
  redis::Connector connector_;
  redis::AsyncConnection read_;
  redis::AsyncConnection command_;
  std::unique_ptr<redis::AsyncConnection> dead_letters_;  // two-step dead letters only
  std::unique_ptr<ConsumerLeaseLink> lease_;              // SPEC 4.7: plain subscriptions only
  EntryLedger ledger_;
  Settlement settlement_;
  Intake router_;
  std::unique_ptr<delivery::HandlerClient> client_;
  DeliveryGates gates_;  // filled in the constructor's body; the pump asks them
  DeliveryPump pump_;
  std::unique_ptr<ConsumerReaper> reaper_;  // consumer.reap_idle set (SPEC 4.6); before intake_
  std::unique_ptr<EntrySource> intake_;
  Gauges gauges_;
  admin::Watchdog::Loop* watchdog_;
  std::unique_ptr<HealthProbe> health_;
  std::unique_ptr<EventLoop::Timer> settle_timer_;
  std::unique_ptr<EventLoop::Timer> pause_timer_;
  std::unique_ptr<EventLoop::Timer> beat_timer_;
  std::unique_ptr<EventLoop::Timer> gauge_timer_;
  std::unique_ptr<EventLoop::Timer> finish_timer_;
  std::unique_ptr<EventLoop::Timer> confirm_timer_;
  bool dead_letter_type_checked_ = false;
  bool stopping_ = false;
  bool settling_ = false;
  bool gauging_ = false;
  bool awaiting_deliveries_ = false;
  bool deliveries_done_ = false;
  bool finishing_ = false;
  bool undoing_ = false;
  bool lost_ = false;  // the stream's owner refused a step (OwnershipLost)
};

size_t SubscriptionLoop::CapacityFor(const config::Subscription& subscription) {
  // Four times what the handler connections carry at once: intake refills in reads of a quarter
  // of it while a full round is still queued, and memory stays bounded however long the stream.
  const size_t capacity = static_cast<size_t>(subscription.handler.concurrency) *
                          static_cast<size_t>(subscription.handler.batch_size) * 4;
  // A shard carries one request at a time: four of them would make a read of one entry per POST
  // at batch_size 1 (a fenced read is two round trips). Its bytes are bounded by its share of
  // the byte budget (ShardSubscription), whatever this count.
  if (subscription.sharding.enabled()) return std::max(capacity, kShardReadAhead);
  return capacity;
}

SubscriptionLoop::SubscriptionLoop(const config::Subscription& subscription, SubscriptionDeps deps)
    : sub_(subscription), deps_(std::move(deps)) {}

SubscriptionLoop::~SubscriptionLoop() {
  if (!thread_.joinable()) return;
  if (!intake_stop_requested_) RequestStopIntake();
  if (!finished_) {
    JoinIntake();
    WaitForDeliveries(SteadyClock::now());
    FinishSettling(SteadyClock::now());
  }
}

Status SubscriptionLoop::Start() {
  auto loop = EventLoop::Create(*deps_.clock);
  if (!loop.ok()) return loop.status();
  loop_ = std::move(*loop);
  loop_->SetFatalHook([fatal = deps_.fatal](const Status& status) { fatal(status); });
  auto client = delivery::MakeHandlerClient(*loop_, sub_);
  if (!client.ok()) return client.status();
  std::unique_ptr<delivery::HandlerClient> handler_client = std::move(*client);
  Core::Stages stages{
      [this] { intake_stopped_.set_value(); },
      [this] { deliveries_done_.set_value(); },
      [this] { settled_.set_value(); },
  };
  thread_ = std::thread(
      [this, stages = std::move(stages), handler_client = std::move(handler_client)]() mutable {
        // The thread's name shows in top -H and in /proc: "sc:" and the subscription's name.
        const std::string name = ("sc:" + sub_.name).substr(0, 15);
        pthread_setname_np(pthread_self(), name.c_str());
        core_ = std::make_unique<Core>(*loop_, sub_, deps_, &held_, &progress_, std::move(stages),
                                       std::move(handler_client));
        core_->Start();
        loop_->Run();
        core_.reset();
      });
  return Status::Ok();
}

void SubscriptionLoop::RunOnLoop(std::function<void()> work) {
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  loop_->Post([work = std::move(work), done] {
    work();
    done->set_value();
  });
  // A loop that ended runs nothing posted to it any more.
  while (finished.wait_for(Millis(100)) != std::future_status::ready) {
    if (loop_ended_.load()) return;
  }
}

void SubscriptionLoop::RequestStopIntake() {
  if (intake_stop_requested_ || !thread_.joinable()) return;
  intake_stop_requested_ = true;
  loop_->Post([this] { core_->StopIntake(); });
}

void SubscriptionLoop::JoinIntake() {
  if (!intake_stop_requested_) return;
  intake_stopped_future_.wait();
}

bool SubscriptionLoop::WaitForDeliveries(SteadyTime deadline, const std::atomic<bool>* cut_short) {
  if (!thread_.joinable() || finished_) return true;
  if (!deliveries_awaited_) {
    deliveries_awaited_ = true;
    loop_->Post([this] { core_->AwaitDeliveries(); });
  }
  // With a cut_short flag, in slices short enough that setting it ends the wait promptly.
  static constexpr Millis kSlice{50};
  while (true) {
    const SteadyTime until =
        cut_short == nullptr ? deadline : std::min(deadline, SteadyClock::now() + kSlice);
    if (deliveries_done_future_.wait_until(until) == std::future_status::ready) return true;
    if (SteadyClock::now() >= deadline || (cut_short != nullptr && cut_short->load())) break;
  }
  RunOnLoop([this] { core_->AbandonDeliveries(); });
  return false;
}

void SubscriptionLoop::FinishSettling(SteadyTime deadline) {
  if (finished_ || !thread_.joinable()) return;
  finished_ = true;
  loop_->Post([this, deadline] { core_->Finish(deadline); });
  settled_future_.wait();
  loop_->Stop();
  thread_.join();
}

}  // namespace streamcar::runtime
