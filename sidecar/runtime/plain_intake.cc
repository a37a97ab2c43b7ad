#include "sidecar/runtime/plain_intake.h"

#include <algorithm>
#include <utility>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/redis/acl_refusal.h"
#include "sidecar/redis/group_info.h"
#include "sidecar/redis/replica_wait.h"
#include "sidecar/redis/settle_scripts.h"

namespace streamcar::runtime {
namespace {

using redis::BatchResult;
using redis::Command;
using redis::Reply;
using redis::SubscriptionOps;

// An error reply other than NOGROUP/WRONGTYPE on the read connection: wait this long before the
// next step rather than spin.
constexpr Millis kServerErrorPause{1000};
// After a read a cluster redirected (MOVED, ASK) or released (UNBLOCKED: the key migrated, or the
// node changed role): the connection is following the slot already. CLUSTERDOWN lasts as long as
// the cluster needs to fail over: it keeps the ordinary pause.
constexpr Millis kRoutingPause{50};

bool IsRoutingError(const Status& status) {
  for (const char* prefix : {"MOVED", "ASK", "UNBLOCKED"}) {
    if (status.IsServerError(prefix)) return true;
  }
  return false;
}

// CLIENT UNBLOCK found the read not blocked yet (it had not reached Redis): try again this soon.
constexpr Millis kUnblockAgain{10};

bool IsServerSide(const Status& status) {
  return status.code() == StatusCode::kServerError || status.code() == StatusCode::kFatal;
}

}  // namespace

template <typename F>
auto PlainIntake::Guard(F f) {
  return [alive = std::weak_ptr<bool>(alive_), f = std::move(f)](auto&&... args) mutable {
    if (alive.expired()) return;
    f(std::forward<decltype(args)>(args)...);
  };
}

PlainIntake::PlainIntake(EventLoop& loop, const config::Subscription& sub,
                         const redis::SubscriptionOps& ops, redis::AsyncConnection* read,
                         redis::AsyncConnection* command, EntryLedger* ledger, Intake* intake,
                         admin::SubscriptionMetrics* /*metrics*/, Callbacks callbacks)
    : loop_(loop),
      sub_(sub),
      ops_(ops),
      read_(read),
      command_(command),
      ledger_(ledger),
      intake_(intake),
      callbacks_(std::move(callbacks)) {
  backoff_timer_ = loop_.CreateTimer([this] { Pump(); });
  pause_timer_ = loop_.CreateTimer([this] { Pump(); });
  unblock_timer_ = loop_.CreateTimer([this] {
    if (block_read_) Unblock();
  });
  reclaim_timer_ = loop_.CreateTimer([this] { ReclaimBeat(); });
  linger_timer_ = loop_.CreateTimer([this] { Pump(); });
  read_->OnReady(Guard([this] { OnReadConnectionReady(); }));
  read_->OnFatal(Guard([this](const Status& status) { Fatal(status); }));
}

PlainIntake::~PlainIntake() {
  read_->OnReady(nullptr);
  read_->OnFatal(nullptr);
}

void PlainIntake::SendRaw(redis::AsyncConnection* connection, Command command,
                          std::function<void(StatusOr<Reply>)> done) {
  std::vector<Command> commands;
  commands.push_back(std::move(command));
  connection->SendBatch(commands, connection->command_timeout(),
                        [done = std::move(done)](BatchResult result) {
                          if (!result.failure.ok()) return done(result.failure);
                          done(std::move(result.replies.front()));
                        });
}

// --- the public steps -------------------------------------------------------------------------

void PlainIntake::Start() {
  if (phase_ != Phase::kIdle || stopping_) return;
  phase_ = Phase::kSetup;
  Pump();
}

void PlainIntake::Poke() {
  // Paused while a BLOCK read waits (the handler refuses, or health_url says unhealthy): end the
  // read now, so that it does not bring in entries nothing can deliver (it would hold them, each
  // with a delivery counted, for as long as the pause lasts).
  if (block_read_ && !unblocking_ && !stopping_ && ledger_->ReadPaused(loop_.clock().Now())) {
    Unblock();
  }
  Pump();
}

void PlainIntake::RequestRecovery() {
  recovery_requested_ = true;
  Pump();
}

void PlainIntake::RequestGroupRecreation() {
  group_missing_ = true;
  Pump();
}

void PlainIntake::Stop(std::function<void()> stopped) {
  if (stopping_) return;  // once
  stopped_ = std::move(stopped);
  stopping_ = true;
  backoff_timer_->Cancel();
  pause_timer_->Cancel();
  reclaim_timer_->Cancel();
  linger_timer_->Cancel();
  if (reaper_ != nullptr) reaper_->Stop();
  if (block_read_) Unblock();
  MaybeFinishStop();
}

void PlainIntake::MaybeFinishStop() {
  if (!stopping_ || phase_ == Phase::kStopped || read_busy_) return;
  phase_ = Phase::kStopped;
  loop_.Post(Guard([this] {
    auto stopped = std::exchange(stopped_, nullptr);
    if (stopped) stopped();
  }));
}

void PlainIntake::Unblock() {
  const std::optional<int64_t> id = read_->client_id();
  // Without its id (the ACL refused CLIENT ID) or after a reconnect, the read's reply is awaited;
  // so too while the two connections are on different nodes (one followed a move, the other not
  // yet): there the id may name another node's client, which must not be woken.
  if (!id || read_->generation() != block_generation_ || read_->node() != command_->node()) return;
  unblocking_ = true;
  SendRaw(command_, Command("CLIENT").Arg("UNBLOCK").Arg(*id), Guard([this](StatusOr<Reply> reply) {
            if (!block_read_) return;  // it ended meanwhile
            if (!reply.ok() || reply->IsError()) {
              LogInfo("cannot end the blocking read at once; waiting for it",
                      {{"subscription", sub_.name},
                       {"error",
                        reply.ok() ? std::string(reply->view().Str()) : reply.status().message()}});
              return;
            }
            // 0: not blocked (yet): the read had not reached Redis when UNBLOCK did.
            if (reply->view().IsInteger() && reply->view().Integer() == 0) {
              unblock_timer_->ArmIn(kUnblockAgain);
            }
          }));
}

// --- the scheduler ------------------------------------------------------------------------------

size_t PlainIntake::ReadCount() {
  const SteadyTime now = loop_.clock().Now();
  if (ledger_->ReadPaused(now)) {
    ArmPauseTimer(now);
    return 0;
  }
  if (!ledger_->WorthReading()) return 0;
  return std::min(ledger_->ReadRoom(), kMaxReadCount);
}

void PlainIntake::ArmPauseTimer(SteadyTime now) {
  // A refusal pause ends by itself; a health pause or a handler still down ends with a Poke.
  const std::optional<SteadyTime> ends = ledger_->PauseEndsAt();
  if (ends && *ends > now) pause_timer_->ArmAt(*ends);
}

void PlainIntake::Pump() {
  if (phase_ == Phase::kStopped) return;
  if (stopping_) return MaybeFinishStop();
  if (phase_ == Phase::kIdle || phase_ == Phase::kFailed) return;
  if (read_busy_ || backoff_timer_->armed() || !read_->ready()) return;
  if (group_missing_ && phase_ != Phase::kSetup) {
    group_missing_ = false;
    return RecreateGroup();
  }
  switch (phase_) {
    case Phase::kSetup:
      return SetupNext();
    case Phase::kDrain:
      return DrainNext();
    case Phase::kReading:
      if (recovering_ || recovery_requested_) return RecoverNext();
      if (reclaim_due_) return ReclaimNext();
      if (reap_due_) return ReapNext();
      return ReadNext();
    default:
      return;
  }
}

void PlainIntake::OnReadConnectionReady() {
  // A reply lost with the connection may have carried entries that are now pending for this
  // consumer and held by nobody: deliver them now, not after claim.min_idle.
  if (drained_) recovery_requested_ = true;
  Pump();
}

void PlainIntake::Fatal(const Status& status) {
  if (phase_ == Phase::kFailed || phase_ == Phase::kStopped) return;
  phase_ = Phase::kFailed;
  backoff_timer_->Cancel();
  pause_timer_->Cancel();
  reclaim_timer_->Cancel();
  linger_timer_->Cancel();
  if (callbacks_.fatal) callbacks_.fatal(status);
  // A stop already asked for still completes once nothing is outstanding.
  MaybeFinishStop();
}

void PlainIntake::Route(std::vector<StreamEntry> entries, IntakeSource source) {
  if (entries.empty()) return;
  intake_->Route(std::move(entries), source);
  if (callbacks_.admitted) callbacks_.admitted();
}

// --- setup --------------------------------------------------------------------------------------

void PlainIntake::SetupNext() {
  read_busy_ = true;
  switch (setup_step_) {
    case SetupStep::kEnsureGroup:
      return SendRaw(read_, ops_.EnsureGroup(sub_.StartId()), Guard([this](StatusOr<Reply> reply) {
                       read_busy_ = false;
                       const Status status =
                           reply.ok() ? ops_.ParseEnsureGroup(reply->view()) : reply.status();
                       if (status.code() == StatusCode::kFatal) return Fatal(status);
                       if (EndIfFenced(status, "install")) return;
                       if (status.IsServerError("NOSCRIPT") && !stopping_) return ReloadScripts();
                       if (!status.ok()) {
                         if (stopping_) return MaybeFinishStop();
                         LogError("cannot ensure consumer group",
                                  {{"subscription", sub_.name}, {"error", status.message()}});
                         backoff_timer_->ArmIn(ReconnectDelay(setup_failures_++, Millis(200),
                                                              Millis(5000), UnitRandom()));
                         return;
                       }
                       setup_failures_ = 0;
                       installed_on_ = read_->generation();
                       setup_step_ = fenced_ != nullptr ? SetupStep::kFenceReplicated
                                                        : SetupStep::kDeadLetterType;
                       Pump();
                     }));
    case SetupStep::kFenceReplicated:
      return ReplicateFence();
    case SetupStep::kDeadLetterType:
      // A dead-letter key of another type would make every dead letter fail (SPEC 3.3): say so
      // now. A key in another slot of a cluster is not on this connection's node: the
      // subscription checks it on the dead-letter connection (two-step, subscription_loop.cc).
      if (skip_dead_letter_type_) {
        read_busy_ = false;  // nothing sent
        setup_step_ = SetupStep::kAckDel;
        if (!sub_.ack.delete_entries) return SetupDone(redis::AckMode::kAckOnly);
        return Pump();
      }
      return SendRaw(
          read_, redis::TypeOf(sub_.dead_letter.stream), Guard([this](StatusOr<Reply> reply) {
            read_busy_ = false;
            StatusOr<std::string> type = reply.ok() ? redis::ParseType(reply->view())
                                                    : StatusOr<std::string>(reply.status());
            if (!type.ok()) return SetupFailed(type.status());
            if (Status wrong =
                    redis::CheckDeadLetterType(sub_.name, sub_.dead_letter.stream, *type);
                !wrong.ok()) {
              return Fatal(wrong);
            }
            if (!sub_.ack.delete_entries) return SetupDone(redis::AckMode::kAckOnly);
            setup_step_ = SetupStep::kAckDel;
            Pump();
          }));
    case SetupStep::kAckDel:
      // COMMAND INFO, never the version string (DESIGN.md trap 6).
      return SendRaw(read_, redis::HasAckDel(), Guard([this](StatusOr<Reply> reply) {
                       read_busy_ = false;
                       StatusOr<bool> has = reply.ok() ? redis::ParseHasAckDel(reply->view())
                                                       : StatusOr<bool>(reply.status());
                       if (!has.ok()) return SetupFailed(has.status());
                       if (*has) return SetupDone(redis::AckMode::kAckDel);
                       setup_step_ = SetupStep::kGroupCount;
                       Pump();
                     }));
    case SetupStep::kGroupCount:
      return SendRaw(
          read_, redis::GroupsOf(sub_.stream), Guard([this](StatusOr<Reply> reply) {
            read_busy_ = false;
            StatusOr<int64_t> groups = reply.ok() ? redis::ParseGroupCount(reply->view())
                                                  : StatusOr<int64_t>(reply.status());
            if (!groups.ok()) return SetupFailed(groups.status());
            if (*groups != 1) {
              return Fatal(Status(StatusCode::kFatal,
                                  "subscription " + sub_.name +
                                      ": ack.delete needs XACKDEL (not on this server) " +
                                      "or its group to be the only group of stream \"" +
                                      sub_.stream + "\" (it has " + std::to_string(*groups) +
                                      "): deleting would take entries from the other groups"));
            }
            SetupDone(redis::AckMode::kAckThenDelete);
          }));
  }
}

void PlainIntake::ReplicateFence() {
  if (read_->generation() != installed_on_) {
    // Reconnected since the install: a WAIT here would count the new connection's writes (none)
    // and confirm nothing. Install again (the same token: idempotent), then wait for that.
    read_busy_ = false;
    setup_step_ = SetupStep::kEnsureGroup;
    return Pump();
  }
  // SHARDING.md B5.1: the install reaches a replica before the first read, so that a failover of
  // the shard's master right after it cannot roll the fence back under a reading owner. Only
  // takeovers pay for it, and only where the master has replicas: WAIT on a master without any
  // blocks its whole timeout (redis/replica_wait.h). The cluster map says how many; elsewhere
  // (standalone, sentinel, a map that does not know yet) ROLE does.
  const auto next = [this] {
    read_busy_ = false;
    setup_step_ = SetupStep::kDeadLetterType;
    Pump();
  };
  const auto wait = [this, next](int replicas) {
    if (replicas <= 0) return next();
    read_busy_ = true;
    const Millis timeout = std::min(kFenceReplicaWait, read_->command_timeout() / 2);
    SendRaw(read_, redis::WaitForReplicas(1, timeout),
            Guard([this, next, timeout](StatusOr<Reply> reply) {
              read_busy_ = false;
              StatusOr<int64_t> acked = reply.ok() ? redis::ParseReplicasAcked(reply->view())
                                                   : StatusOr<int64_t>(reply.status());
              if (!acked.ok() && acked.status().code() == StatusCode::kServerError &&
                  acked.status().message().find("replica") != std::string::npos) {
                // "WAIT cannot be used with replica instances": the node was demoted, and the
                // install may be dropped as it resyncs: install again on the new master.
                read_->FollowDemotedMaster("WAIT says the node is a replica now");
                return SetupFailed(acked.status());
              }
              if (!acked.ok() && acked.status().code() != StatusCode::kServerError) {
                return SetupFailed(acked.status());  // the connection failed: from the install
              }
              if (!acked.ok() || *acked < 1) {
                // The fence stays as safe as Redis replication is (B5.1); the shard is read.
                LogWarn("shard fence not confirmed by a replica; reading anyway",
                        {{"subscription", sub_.name},
                         {"shard", sub_.stream},
                         {"token", fenced_->token()},
                         {"wait_ms", static_cast<int64_t>(timeout.count())},
                         {"error", acked.ok() ? std::string() : acked.status().message()}});
              }
              next();
            }));
  };
  if (const std::optional<int> listed = read_->KnownReplicas()) return wait(*listed);
  SendRaw(read_, redis::RoleProbe(), Guard([this, wait](StatusOr<Reply> reply) {
            read_busy_ = false;
            StatusOr<int> replicas = reply.ok() ? redis::ParseReplicaCount(reply->view())
                                                : StatusOr<int>(reply.status());
            if (replicas.ok() && *replicas == redis::kNotAMaster) {
              read_->FollowDemotedMaster("ROLE says the node is a replica now");
              return SetupFailed(
                  Status(StatusCode::kServerError, "READONLY the shard's node is a replica now"));
            }
            if (!replicas.ok() && replicas.status().code() != StatusCode::kServerError) {
              return SetupFailed(replicas.status());
            }
            // ROLE refused (an ACL without @admin): nothing says a replica exists; no WAIT.
            wait(replicas.ok() ? *replicas : 0);
          }));
}

void PlainIntake::SetupFailed(const Status& status) {
  // From the start again once the failure is handled, as the old reader's Setup did.
  setup_step_ = SetupStep::kEnsureGroup;
  ReadFailed(status);
}

void PlainIntake::SetupDone(redis::AckMode mode) {
  phase_ = Phase::kDrain;
  if (callbacks_.ack_mode) callbacks_.ack_mode(mode);
  LogInfo("consumer group ready", {{"subscription", sub_.name},
                                   {"stream", sub_.stream},
                                   {"group", sub_.group},
                                   {"consumer", ops_.consumer()}});
  if (callbacks_.group_ready) callbacks_.group_ready();
  Pump();
}

// --- the own-PEL drain ----------------------------------------------------------------------

void PlainIntake::DrainNext() {
  // History reads from an advancing cursor: re-reading from 0 would count every delivery again
  // (DESIGN.md trap 2). Each read of an entry counts one delivery, as a redelivery should.
  const size_t count = ReadCount();
  if (count == 0) return;
  read_busy_ = true;
  SendRaw(read_, ops_.ReadOwnPending(drain_cursor_, static_cast<int>(count)),
          Guard([this](StatusOr<Reply> reply) {
            StatusOr<std::vector<StreamEntry>> entries =
                reply.ok() ? SubscriptionOps::ParseRead(reply->view())
                           : StatusOr<std::vector<StreamEntry>>(reply.status());
            if (!entries.ok() || entries->empty()) {
              read_busy_ = false;
              if (!entries.ok()) return ReadFailed(entries.status());
              return DrainDone();
            }
            auto read = std::make_shared<std::vector<StreamEntry>>(std::move(*entries));
            read_->SendBatch(ops_.DeliveryCounts(*read), read_->command_timeout(),
                             Guard([this, read](const BatchResult& counts) {
                               const Status status = counts.failure.ok()
                                                         ? SubscriptionOps::ApplyDeliveryCounts(
                                                               counts.replies, read.get())
                                                         : counts.failure;
                               if (!status.ok()) {
                                 // The cursor stays: the entries are read again (and routed) after
                                 // the failure.
                                 read_busy_ = false;
                                 return ReadFailed(status);
                               }
                               drain_cursor_ = read->back().id;
                               drained_count_ += read->size();
                               Route(std::move(*read), IntakeSource::kDrain);
                               read_busy_ = false;
                               Pump();
                             }));
          }));
}

void PlainIntake::DrainDone() {
  if (drained_count_ > 0) {
    LogInfo("recovered own pending entries",
            {{"subscription", sub_.name}, {"count", static_cast<int64_t>(drained_count_)}});
  }
  const bool first = !drained_;
  drained_ = true;
  phase_ = Phase::kReading;
  if (first && callbacks_.drained) callbacks_.drained();
  // A shard's takeover claimed every pending entry: there is nobody's to reclaim after it.
  if (!stopping_ && fenced_ == nullptr) reclaim_timer_->ArmIn(sub_.claim.interval);
  Pump();
}

// --- new entries ----------------------------------------------------------------------------

void PlainIntake::ReadNext() {
  if (lingering_until_) {
    if (loop_.clock().Now() < *lingering_until_) {
      linger_timer_->ArmAt(*lingering_until_);
      return;
    }
    lingering_until_.reset();
  }
  const size_t count = ReadCount();
  if (count == 0) return;
  if (fenced_ != nullptr) return ReadShardNext(count);
  read_asked_ = count;
  read_busy_ = true;
  block_read_ = true;
  block_generation_ = read_->generation();
  read_->SendBlocking(ops_.ReadNew(static_cast<int>(count), kBlock), kBlock,
                      Guard([this](StatusOr<Reply> reply) { OnReadNew(std::move(reply)); }));
}

void PlainIntake::OnReadNew(StatusOr<Reply> reply) {
  block_read_ = false;
  unblocking_ = false;
  unblock_timer_->Cancel();
  StatusOr<std::vector<StreamEntry>> entries =
      reply.ok() ? SubscriptionOps::ParseRead(reply->view())
                 : StatusOr<std::vector<StreamEntry>>(reply.status());
  if (!entries.ok()) {
    read_busy_ = false;
    return ReadFailed(entries.status());
  }
  RouteNew(std::move(*entries));
}

void PlainIntake::RouteNew(std::vector<StreamEntry> entries) {
  if (read_linger_.count() > 0 && !entries.empty() && entries.size() < read_asked_) {
    lingering_until_ = loop_.clock().Now() + read_linger_;
  }
  Route(std::move(entries), IntakeSource::kNew);
  read_busy_ = false;
  Pump();
}

// --- a shard's reads (sharded subscriptions) ---------------------------------------------------

void PlainIntake::ReadShardNext(size_t count) {
  // The fenced read in two round trips (FencedShardOps::WatchFence): the WATCH, the token and
  // MULTI, then the read inside the transaction, which runs only if the fence is unchanged since.
  if (read_->FollowingAsk()) {
    // The slot is migrating: an ASKING before each command would be queued inside the
    // transaction. Wait until the connection goes back to the slot's master (it does after a
    // second; it follows the -ASK again while the migration runs).
    backoff_timer_->ArmIn(kRoutingPause);
    return;
  }
  if (!read_->ready()) return;  // ending the -ASK: the connection moves; OnReady pumps again
  read_asked_ = count;
  read_busy_ = true;
  const uint64_t watched_on = read_->generation();
  read_->SendBatch(fenced_->WatchFence(), read_->command_timeout(),
                   Guard([this, count, watched_on](BatchResult watched) {
                     OnFenceChecked(count, watched_on, std::move(watched));
                   }));
}

void PlainIntake::OnFenceChecked(size_t count, uint64_t watched_on, redis::BatchResult watched) {
  sharding::FencedShardOps::FenceCheck check;
  if (watched.failure.ok()) {
    check = fenced_->CheckFence(watched.replies);
  } else {
    check.status = watched.failure;
  }
  // The reply came on this connection, so the transaction it opened is open on it; checked all
  // the same, since on any other connection the read would run unchecked.
  const bool same_connection = read_->generation() == watched_on;
  if (check.status.ok() && !stopping_ && same_connection) return ReadWatched(count);
  if (check.in_transaction && same_connection) {
    // Closed before anything else goes out on the connection: later commands (the wait, a
    // takeover step) would be queued instead of run. A close that is refused leaves it open,
    // which the next check sees and closes then; an ACL refusal of it is fatal.
    SendRaw(read_, sharding::FencedShardOps::CloseTransaction(),
            Guard([this](StatusOr<Reply> closed) {
              if (!closed.ok() && redis::IsAclRefusal(closed.status())) {
                ReadFailed(closed.status());
              }
            }));
  }
  read_busy_ = false;
  if (!check.status.ok()) return ReadFailed(check.status);
  if (stopping_) return MaybeFinishStop();
  Pump();
}

void PlainIntake::ReadWatched(size_t count) {
  read_->SendBatch(fenced_->ReadWatched(static_cast<int>(count)), read_->command_timeout(),
                   Guard([this](BatchResult result) {
                     StatusOr<std::optional<sharding::FencedRead>> read =
                         result.failure.ok()
                             ? sharding::FencedShardOps::ParseWatchedRead(result.replies)
                             : StatusOr<std::optional<sharding::FencedRead>>(result.failure);
                     if (!read.ok()) {
                       read_busy_ = false;
                       return ReadFailed(read.status());
                     }
                     if (!read->has_value()) {
                       // The fence was written since the WATCH (a newer owner's install): EXEC
                       // read nothing. The next check finds the new token and stops the shard.
                       read_busy_ = false;
                       return Pump();
                     }
                     sharding::FencedRead& taken = **read;
                     if (taken.entries.empty()) {
                       if (stopping_) {
                         read_busy_ = false;
                         return MaybeFinishStop();
                       }
                       return WaitForNew(taken.tail_id);  // the read connection stays busy
                     }
                     RouteNew(std::move(taken.entries));
                   }));
}

void PlainIntake::WaitForNew(const std::string& tail_id) {
  // A plain XREAD: it changes nothing (no PEL entry, no last-delivered id), so a member paused
  // while it waits cannot take entries a newer owner is handling (SHARDING.md B5). Whatever it
  // returns only means "read again"; the fenced read takes the entries.
  block_read_ = true;
  block_generation_ = read_->generation();
  read_->SendBlocking(fenced_->WaitForNew(tail_id, kBlock), kBlock,
                      Guard([this](StatusOr<Reply> reply) {
                        block_read_ = false;
                        unblocking_ = false;
                        unblock_timer_->Cancel();
                        read_busy_ = false;
                        if (!reply.ok()) return ReadFailed(reply.status());
                        Pump();
                      }));
}

void PlainIntake::ReloadScripts() {
  const SteadyTime now = loop_.clock().Now();
  // A NOSCRIPT right after a reload is not cured by loading again at once: pause as for any
  // server error rather than spin.
  const bool again_soon = reloaded_at_ && now - *reloaded_at_ < kServerErrorPause;
  reloaded_at_ = now;
  LogWarn("redis forgot the scripts; loading them again", {{"subscription", sub_.name}});
  std::vector<Command> loads;
  for (const redis::Script* script : ops_.Scripts()) loads.push_back(script->Load());
  read_busy_ = true;
  read_->SendBatch(
      loads, read_->command_timeout(), Guard([this, again_soon](const BatchResult& loaded) {
        read_busy_ = false;
        if (stopping_) return MaybeFinishStop();
        Status status = loaded.failure;
        for (const Reply& r : loaded.replies) {
          if (status.ok() && r.IsError()) status = redis::ErrorOf(r.view());
        }
        if (!status.ok()) {
          LogError("cannot load the scripts",
                   {{"subscription", sub_.name}, {"error", status.message()}});
        }
        backoff_timer_->ArmIn(status.ok() && !again_soon ? Millis(0) : kServerErrorPause);
      }));
}

bool PlainIntake::EndIfFenced(const Status& status, std::string_view op) {
  if (fenced_ == nullptr) return false;
  const std::optional<int64_t> installed = sharding::FencedShardOps::FencedBy(status);
  if (!installed) return false;
  LogWarn("shard fenced: a newer owner holds it", {{"subscription", sub_.name},
                                                   {"shard", sub_.stream},
                                                   {"token", fenced_->token()},
                                                   {"installed", *installed}});
  phase_ = Phase::kFailed;
  backoff_timer_->Cancel();
  pause_timer_->Cancel();
  linger_timer_->Cancel();
  if (callbacks_.fenced) callbacks_.fenced(*installed, op);
  MaybeFinishStop();
  return true;
}

// --- failures of the read connection ----------------------------------------------------------

void PlainIntake::ReadFailed(const Status& status) {
  // Closed on purpose, stopping, or failed already: nothing more to try.
  if (status.code() == StatusCode::kCancelled || stopping_ || phase_ == Phase::kFailed) {
    return MaybeFinishStop();
  }
  if (EndIfFenced(status, "read")) return;
  if (status.IsServerError("NOSCRIPT")) return ReloadScripts();
  if (status.IsServerError("NOGROUP")) return RecreateGroup();
  if (status.IsServerError("WRONGTYPE")) {
    return Fatal(Status(StatusCode::kFatal, "key \"" + sub_.stream +
                                                "\" is no longer a stream (WRONGTYPE); "
                                                "streamcar leaves it untouched"));
  }
  if (status.code() == StatusCode::kFatal) return Fatal(status);
  if (redis::IsAclRefusal(status)) {
    // The ACL user may not run a command the subscription needs (README "Redis topologies" lists
    // them): no retry fixes that, and the refusal would repeat once a second for ever.
    return Fatal(Status(StatusCode::kFatal, "subscription " + sub_.name +
                                                ": the Redis ACL user may not run a command "
                                                "streamcar needs (" +
                                                status.message() + ")"));
  }
  if (IsRoutingError(status)) {
    // A cluster moving the stream's slot, or failing over (SPEC 8): the connection follows the
    // slot by itself, so read again shortly, not after the pause an unknown error gets.
    LogInfo("read redirected", {{"subscription", sub_.name}, {"error", status.message()}});
    backoff_timer_->ArmIn(kRoutingPause);
    return;
  }
  if (status.code() == StatusCode::kServerError) {
    LogError("read failed", {{"subscription", sub_.name}, {"error", status.message()}});
    backoff_timer_->ArmIn(kServerErrorPause);
    return;
  }
  LogWarn("redis read failed; reconnecting",
          {{"subscription", sub_.name}, {"error", status.message()}});
  if (read_->ready()) {
    // Still connected (a reply of a shape nothing here expects): carry on as after a reconnect,
    // a little later, rather than spin.
    if (drained_) recovery_requested_ = true;
    backoff_timer_->ArmIn(kServerErrorPause);
  }
  // Otherwise the connection reconnects by itself; OnReadConnectionReady resumes.
}

void PlainIntake::RecreateGroup() {
  // The key was deleted or evicted with its groups: re-create at 0 so nothing written since is
  // skipped (DESIGN.md trap 10: log once, not a flood).
  LogWarn("consumer group missing; re-creating it at 0",
          {{"subscription", sub_.name}, {"stream", sub_.stream}, {"group", sub_.group}});
  read_busy_ = true;
  SendRaw(read_, ops_.EnsureGroup("0"), Guard([this](StatusOr<Reply> reply) {
            read_busy_ = false;
            const Status created =
                reply.ok() ? ops_.ParseEnsureGroup(reply->view()) : reply.status();
            if (created.code() == StatusCode::kFatal) return Fatal(created);
            if (EndIfFenced(created, "install")) return;
            if (created.ok()) {
              nogroup_failures_ = 0;
              return Pump();
            }
            if (stopping_) return MaybeFinishStop();
            // Out of memory, read-only, or no permission: wait a growing step rather than spin.
            LogError("cannot re-create the consumer group",
                     {{"subscription", sub_.name}, {"error", created.message()}});
            if (!IsServerSide(created)) group_missing_ = true;  // try again once reconnected
            backoff_timer_->ArmIn(
                ReconnectDelay(nogroup_failures_++, Millis(200), Millis(5000), UnitRandom()));
          }));
}

// --- the recovery re-read of the own pending list ---------------------------------------------

void PlainIntake::RecoverNext() {
  if (!recovering_) {
    recovering_ = true;
    recovery_requested_ = false;
    recover_start_ = "-";
    recovered_ = 0;
    recover_kept_up_to_ = ledger_->kept_sequence();
  }
  // Fetched entries take room like a read's: never more than there is room for; except the
  // entries whose ordering lanes are kept for them (they had room until their release), or their
  // keys, filling the room behind them, could block for good.
  if (ReadCount() == 0 && !ledger_->has_kept_lanes()) return;
  read_busy_ = true;
  SendRaw(read_, ops_.OwnPendingIds(recover_start_, kRecoveryPage),
          Guard([this](StatusOr<Reply> reply) {
            StatusOr<redis::PendingIds> page = reply.ok()
                                                   ? SubscriptionOps::ParsePendingIds(reply->view())
                                                   : StatusOr<redis::PendingIds>(reply.status());
            if (!page.ok()) return RecoverFailed(page.status());
            if (page->empty()) {
              read_busy_ = false;
              return RecoverDone();
            }
            // One read's worth at most (and the kept lanes' entries, see above).
            const size_t room =
                std::max(std::min(ledger_->ReadRoom(), kMaxReadCount), ledger_->kept_lanes());
            if (room == 0) {  // this page again once there is room
              read_busy_ = false;
              return Pump();
            }
            recover_last_page_ = page->size() < static_cast<size_t>(kRecoveryPage);
            std::string next = "(" + page->back().first;
            std::vector<std::string> missing;
            recover_counts_.clear();
            for (const auto& [id, count] : *page) {
              if (ledger_->Holds(id)) continue;  // what holds it settles it
              if (missing.size() >= room) {
                // Out of room: the rest of this page after the last id taken, later.
                next = "(" + missing.back();
                recover_last_page_ = false;
                break;
              }
              missing.push_back(id);
              recover_counts_[id] = count;
            }
            recover_start_ = std::move(next);
            if (missing.empty()) return RecoverPageDone();
            RecoverKeepAlive(std::move(missing), false);
          }));
}

void PlainIntake::RecoverKeepAlive(std::vector<std::string> ids, bool reloaded) {
  // Refresh their lease in the same step as checking they are still ours: a peer's reclaim after
  // an outage longer than claim.min_idle must not deliver them at the same time.
  auto shared = std::make_shared<std::vector<std::string>>(std::move(ids));
  SendRaw(read_, ops_.KeepAlive(*shared), Guard([this, shared, reloaded](StatusOr<Reply> reply) {
            if (reply.ok() && redis::IsNoScript(reply->view()) && !reloaded) {
              std::vector<Command> loads;
              for (const redis::Script* script : ops_.Scripts()) {
                loads.push_back(script->Load());
              }
              read_->SendBatch(loads, read_->command_timeout(),
                               Guard([this, shared](const BatchResult& loaded) {
                                 Status status = loaded.failure;
                                 for (const Reply& r : loaded.replies) {
                                   if (status.ok() && r.IsError())
                                     status = redis::ErrorOf(r.view());
                                 }
                                 if (!status.ok()) return RecoverFailed(status);
                                 RecoverKeepAlive(std::move(*shared), true);
                               }));
              return;
            }
            StatusOr<std::vector<std::string>> lost =
                reply.ok() ? SubscriptionOps::ParseIds(reply->view())
                           : StatusOr<std::vector<std::string>>(reply.status());
            if (!lost.ok()) return RecoverFailed(lost.status());
            std::erase_if(*shared, [&](const std::string& id) {
              return std::find(lost->begin(), lost->end(), id) != lost->end();
            });
            if (shared->empty()) return RecoverPageDone();
            RecoverFetch(std::move(*shared));
          }));
}

void PlainIntake::RecoverFetch(std::vector<std::string> ids) {
  auto shared = std::make_shared<std::vector<std::string>>(std::move(ids));
  read_->SendBatch(ops_.Fetch(*shared), read_->command_timeout(),
                   Guard([this, shared](const BatchResult& fetched) {
                     StatusOr<std::vector<StreamEntry>> entries =
                         fetched.failure.ok()
                             ? SubscriptionOps::ParseFetch(fetched.replies, *shared)
                             : StatusOr<std::vector<StreamEntry>>(fetched.failure);
                     if (!entries.ok()) return RecoverFailed(entries.status());
                     // XRANGE counts no delivery: the count is XPENDING's.
                     for (auto& entry : *entries) entry.attempts = recover_counts_[entry.id];
                     recovered_ += entries->size();
                     Route(std::move(*entries), IntakeSource::kRecover);
                     RecoverPageDone();
                   }));
}

void PlainIntake::RecoverPageDone() {
  read_busy_ = false;
  if (recover_last_page_) return RecoverDone();
  Pump();
}

void PlainIntake::RecoverFailed(const Status& status) {
  read_busy_ = false;
  recovering_ = false;
  if (EndIfFenced(status, "claim")) return;
  // Tried again on the next lost connection or ambiguous settlement; the reclaim beat covers the
  // rest after claim.min_idle.
  LogWarn("cannot read own pending entries",
          {{"subscription", sub_.name}, {"error", status.message()}});
  // Lanes kept for entries it was to bring back block their keys until it succeeds: again, after
  // the group is re-created or a pause (never in a tight loop on an error reply).
  const bool again = ledger_->has_kept_lanes();
  if (again) recovery_requested_ = true;
  if (stopping_) return MaybeFinishStop();
  if (status.code() == StatusCode::kFatal) return Fatal(status);
  if (status.IsServerError("NOGROUP")) {
    group_missing_ = true;
    return Pump();
  }
  if ((again && IsServerSide(status)) || (!IsServerSide(status) && read_->ready())) {
    backoff_timer_->ArmIn(kServerErrorPause);  // not a lost connection: do not spin
    return;
  }
  Pump();
}

void PlainIntake::RecoverDone() {
  recovering_ = false;
  // What the re-read did not bring back was settled after all: its key's lane goes on (a lane
  // kept since this re-read began waits for the next one, which its release requested).
  ledger_->ReleaseKeptLanes(recover_kept_up_to_);
  if (recovered_ > 0) {
    LogInfo("recovered own pending entries nothing here held",
            {{"subscription", sub_.name}, {"count", static_cast<int64_t>(recovered_)}});
  }
  Pump();
}

// --- the reclaim beat -----------------------------------------------------------------------

void PlainIntake::ReclaimBeat() {
  if (stopping_ || phase_ != Phase::kReading) return;
  reclaim_due_ = true;
  if (reaper_ != nullptr && reaper_->Due(loop_.clock().Now())) reap_due_ = true;
  Pump();
}

void PlainIntake::ReclaimNext() {
  // Exhausted and deleted entries take room too, so a dead peer's long PEL is followed only as
  // far as there is room; the cursor is kept for the next beat.
  const size_t room = ledger_->ReadRoom();
  if (room == 0) {
    ReclaimEnd();
    return Pump();
  }
  const size_t count = std::min(room, static_cast<size_t>(std::max(sub_.claim.count, 1)));
  read_busy_ = true;
  SendRaw(read_, ops_.AutoClaim(sub_.claim.min_idle, reclaim_cursor_, static_cast<int>(count)),
          Guard([this](StatusOr<Reply> reply) {
            StatusOr<redis::AutoClaimReply> claimed =
                reply.ok() ? SubscriptionOps::ParseAutoClaim(reply->view())
                           : StatusOr<redis::AutoClaimReply>(reply.status());
            if (!claimed.ok()) return ReclaimFailed(claimed.status(), false);
            if (claimed->entries.empty()) return ReclaimRoute(std::move(*claimed));
            auto shared = std::make_shared<redis::AutoClaimReply>(std::move(*claimed));
            read_->SendBatch(ops_.DeliveryCounts(shared->entries), read_->command_timeout(),
                             Guard([this, shared](const BatchResult& counts) {
                               const Status status = counts.failure.ok()
                                                         ? SubscriptionOps::ApplyDeliveryCounts(
                                                               counts.replies, &shared->entries)
                                                         : counts.failure;
                               if (!status.ok()) return ReclaimFailed(status, true);
                               ReclaimRoute(std::move(*shared));
                             }));
          }));
}

void PlainIntake::ReclaimFailed(const Status& status, bool claimed) {
  read_busy_ = false;
  if (!status.IsServerError("NOGROUP")) {  // the next read meets it too, and re-creates the group
    LogWarn("reclaim beat failed", {{"subscription", sub_.name}, {"error", status.message()}});
  }
  // Claimed to this consumer, their counts unknown: the own-PEL re-read brings them in with
  // their counts rather than after another claim.min_idle.
  if (claimed) recovery_requested_ = true;
  ReclaimEnd();
  Pump();
}

void PlainIntake::ReclaimRoute(redis::AutoClaimReply claimed) {
  reclaim_cursor_ = std::move(claimed.next_cursor);
  std::vector<StreamEntry> entries = std::move(claimed.entries);
  for (auto& id : claimed.deleted_ids) {
    StreamEntry gone;
    gone.id = std::move(id);
    gone.deleted = true;
    entries.push_back(std::move(gone));
  }
  Route(std::move(entries), IntakeSource::kReclaim);
  read_busy_ = false;
  // Not at the end of the scan: the next step goes on from the cursor, within this beat.
  if (reclaim_cursor_ == "0-0") ReclaimEnd();
  Pump();
}

void PlainIntake::ReclaimEnd() {
  reclaim_due_ = false;
  if (!stopping_ && phase_ == Phase::kReading) reclaim_timer_->ArmIn(sub_.claim.interval);
}

// --- consumer reaping (SPEC 4.6) ------------------------------------------------------------

void PlainIntake::ReapNext() {
  reap_due_ = false;
  read_busy_ = true;
  reaper_->Run(read_, loop_.clock().Now(), Guard([this] {
                 read_busy_ = false;
                 if (reaper_->TakeRecoveryRequest()) recovery_requested_ = true;
                 // A pass never ends the subscription: an ACL refusal only turned reaping off.
                 Pump();
               }));
}

}  // namespace streamcar::runtime
