#include "sidecar/runtime/group_intake.h"

#include <algorithm>
#include <utility>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/redis/acl_refusal.h"
#include "sidecar/redis/group_info.h"
#include "sidecar/redis/settle_scripts.h"

namespace streamcar::runtime {
namespace {

using redis::BatchResult;
using redis::Command;
using redis::Reply;
using redis::SubscriptionOps;

bool IsRoutingError(const Status& status) {
  for (const char* prefix : {"MOVED", "ASK", "UNBLOCKED"}) {
    if (status.IsServerError(prefix)) return true;
  }
  return false;
}

// CLIENT UNBLOCK found the read not blocked yet (it had not reached Redis): try again this soon.
constexpr Millis kUnblockAgain{10};
// The command connection that sends CLIENT UNBLOCK is not ready (opening at start or after a
// reconnect, moving to a slot's new master): look again this soon, rather than wait out the
// read's whole block.
constexpr Millis kUnblockOnceConnected{50};

bool IsServerSide(const Status& status) {
  return status.code() == StatusCode::kServerError || status.code() == StatusCode::kFatal;
}

}  // namespace

GroupIntake::GroupIntake(const SourceParts& parts)
    : loop_(parts.loop),
      sub_(parts.sub),
      ops_(parts.ops),
      read_(parts.read),
      ledger_(parts.ledger),
      command_(parts.command),
      router_(parts.router),
      callbacks_(parts.callbacks),
      recovery_(parts.sub.name, parts.ops, parts.read, parts.ledger, this) {
  backoff_timer_ = loop_.CreateTimer([this] { Pump(); });
  pause_timer_ = loop_.CreateTimer([this] { Pump(); });
  unblock_timer_ = loop_.CreateTimer([this] {
    // Still wanted: a stop, or a pause that has not ended meanwhile.
    if (block_read_ && (stopping_ || ledger_->ReadPaused(loop_.clock().Now()))) Unblock();
  });
  linger_timer_ = loop_.CreateTimer([this] { Pump(); });
  read_->OnReady(Guard([this] { OnReadConnectionReady(); }));
  read_->OnFatal(Guard([this](const Status& status) { Fatal(status); }));
}

GroupIntake::~GroupIntake() {
  read_->OnReady(nullptr);
  read_->OnFatal(nullptr);
}

// --- the public steps -------------------------------------------------------------------------

void GroupIntake::Start() {
  if (phase_ != Phase::kIdle || stopping_) return;
  phase_ = Phase::kSetup;
  Pump();
}

void GroupIntake::Poke() {
  // Paused while a BLOCK read waits (the handler refuses, or health_url says unhealthy): end the
  // read now, so that it does not bring in entries nothing can deliver (it would hold them, each
  // with a delivery counted, for as long as the pause lasts).
  if (block_read_ && !unblocking_ && !stopping_ && ledger_->ReadPaused(loop_.clock().Now())) {
    Unblock();
  }
  Pump();
}

void GroupIntake::RequestRecovery() {
  recovery_.Request();
  Pump();
}

void GroupIntake::RequestGroupRecreation() {
  group_missing_ = true;
  Pump();
}

void GroupIntake::Stop(std::function<void()> stopped) {
  if (stopping_) return;  // once
  stopped_ = std::move(stopped);
  stopping_ = true;
  EndTimers();
  EndOwnSteps(/*stopping=*/true);
  if (block_read_) Unblock();
  MaybeFinishStop();
}

void GroupIntake::MaybeFinishStop() {
  if (!stopping_ || phase_ == Phase::kStopped || read_busy_) return;
  phase_ = Phase::kStopped;
  loop_.Post(Guard([this] {
    auto stopped = std::exchange(stopped_, nullptr);
    if (stopped) stopped();
  }));
}

void GroupIntake::EndTimers() {
  backoff_timer_->Cancel();
  pause_timer_->Cancel();
  linger_timer_->Cancel();
}

void GroupIntake::Unblock() {
  if (!command_->ready()) {
    // Armed once: every Poke comes here while a pause lasts, and must not push it back.
    if (!unblock_timer_->armed()) unblock_timer_->ArmIn(kUnblockOnceConnected);
    return;
  }
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

void GroupIntake::BeginBlockingRead() {
  block_read_ = true;
  block_generation_ = read_->generation();
}

void GroupIntake::EndBlockingRead() {
  block_read_ = false;
  unblocking_ = false;
  unblock_timer_->Cancel();
}

void GroupIntake::PauseSteps(Millis pause) { backoff_timer_->ArmIn(pause); }

// --- the scheduler ------------------------------------------------------------------------------

size_t GroupIntake::ReadCount() {
  const SteadyTime now = loop_.clock().Now();
  if (ledger_->ReadPaused(now)) {
    ArmPauseTimer(now);
    return 0;
  }
  if (!ledger_->WorthReading()) return 0;
  return std::min(ledger_->ReadRoom(), kMaxReadCount);
}

void GroupIntake::ArmPauseTimer(SteadyTime now) {
  // A refusal pause ends by itself; a health pause or a handler still down ends with a Poke.
  const std::optional<SteadyTime> ends = ledger_->PauseEndsAt();
  if (ends && *ends > now) pause_timer_->ArmAt(*ends);
}

void GroupIntake::Pump() {
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
      if (recovery_.Wanted()) {
        read_busy_ = recovery_.Next();
        return;
      }
      if (OwnStep()) return;
      return ReadNext();
    default:
      return;
  }
}

void GroupIntake::EndStep() {
  read_busy_ = false;
  Pump();
}

void GroupIntake::OnReadConnectionReady() {
  // A reply lost with the connection may have carried entries that are now pending for this
  // consumer and held by nobody: deliver them now, not after claim.min_idle.
  if (drained_) recovery_.Request();
  Pump();
}

void GroupIntake::Fatal(const Status& status) {
  if (phase_ == Phase::kFailed || phase_ == Phase::kStopped) return;
  phase_ = Phase::kFailed;
  EndTimers();
  EndOwnSteps(/*stopping=*/false);
  if (callbacks_.fatal) callbacks_.fatal(status);
  // A stop already asked for still completes once nothing is outstanding.
  MaybeFinishStop();
}

void GroupIntake::Route(std::vector<StreamEntry> entries, IntakeSource source) {
  if (entries.empty()) return;
  router_->Route(std::move(entries), source);
  if (callbacks_.admitted) callbacks_.admitted();
}

// --- setup --------------------------------------------------------------------------------------

void GroupIntake::SetupNext() {
  read_busy_ = true;
  switch (setup_step_) {
    case SetupStep::kEnsureGroup:
      return EnsureGroup();
    case SetupStep::kConfirmGroup:
      return ConfirmGroup();
    case SetupStep::kDeadLetterType:
      return CheckDeadLetterType();
    case SetupStep::kAckDel:
      return CheckAckDel();
    case SetupStep::kGroupCount:
      return CountGroups();
  }
}

void GroupIntake::EnsureGroup() {
  SendRaw(read_, ops_.EnsureGroup(sub_.StartId()), Guard([this](StatusOr<Reply> reply) {
            read_busy_ = false;
            const Status status =
                reply.ok() ? ops_.ParseEnsureGroup(reply->view()) : reply.status();
            if (status.code() == StatusCode::kFatal) return Fatal(status);
            if (EndIfRefused(status, "install")) return;
            if (status.IsServerError("NOSCRIPT") && !stopping_) return ReloadScripts();
            if (!status.ok()) {
              if (stopping_) return MaybeFinishStop();
              LogError("cannot ensure consumer group",
                       {{"subscription", sub_.name}, {"error", status.message()}});
              backoff_timer_->ArmIn(
                  ReconnectDelay(setup_failures_++, Millis(200), Millis(5000), UnitRandom()));
              return;
            }
            setup_failures_ = 0;
            group_ensured_on_ = read_->generation();
            setup_step_ = SetupStep::kConfirmGroup;
            Pump();
          }));
}

void GroupIntake::SetupContinue() {
  read_busy_ = false;
  setup_step_ = SetupStep::kDeadLetterType;
  Pump();
}

void GroupIntake::SetupRestart() {
  read_busy_ = false;
  setup_step_ = SetupStep::kEnsureGroup;
  Pump();
}

void GroupIntake::CheckDeadLetterType() {
  // A dead-letter key of another type would make every dead letter fail (SPEC 3.3): say so now.
  // A key in another slot of a cluster is not on this connection's node: the subscription checks
  // it on the dead-letter connection (two-step, subscription_loop.cc).
  if (skip_dead_letter_type_) {
    read_busy_ = false;  // nothing sent
    setup_step_ = SetupStep::kAckDel;
    if (!sub_.ack.delete_entries) return SetupDone(redis::AckMode::kAckOnly);
    return Pump();
  }
  SendRaw(
      read_, redis::TypeOf(sub_.dead_letter.stream), Guard([this](StatusOr<Reply> reply) {
        read_busy_ = false;
        StatusOr<std::string> type =
            reply.ok() ? redis::ParseType(reply->view()) : StatusOr<std::string>(reply.status());
        if (!type.ok()) return SetupFailed(type.status());
        if (Status wrong = redis::CheckDeadLetterType(sub_.name, sub_.dead_letter.stream, *type);
            !wrong.ok()) {
          return Fatal(wrong);
        }
        if (!sub_.ack.delete_entries) return SetupDone(redis::AckMode::kAckOnly);
        setup_step_ = SetupStep::kAckDel;
        Pump();
      }));
}

void GroupIntake::CheckAckDel() {
  // COMMAND INFO, never the version string (DESIGN.md trap 6).
  SendRaw(read_, redis::HasAckDel(), Guard([this](StatusOr<Reply> reply) {
            read_busy_ = false;
            StatusOr<bool> has =
                reply.ok() ? redis::ParseHasAckDel(reply->view()) : StatusOr<bool>(reply.status());
            if (!has.ok()) return SetupFailed(has.status());
            if (*has) return SetupDone(redis::AckMode::kAckDel);
            setup_step_ = SetupStep::kGroupCount;
            Pump();
          }));
}

void GroupIntake::CountGroups() {
  SendRaw(read_, redis::GroupsOf(sub_.stream), Guard([this](StatusOr<Reply> reply) {
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

void GroupIntake::SetupFailed(const Status& status) {
  // From the start again once the failure is handled, as the old reader's Setup did.
  setup_step_ = SetupStep::kEnsureGroup;
  ReadFailed(status);
}

void GroupIntake::SetupDone(redis::AckMode mode) {
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

void GroupIntake::DrainNext() {
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
                               EndStep();
                             }));
          }));
}

void GroupIntake::DrainDone() {
  if (drained_count_ > 0) {
    LogInfo("recovered own pending entries",
            {{"subscription", sub_.name}, {"count", static_cast<int64_t>(drained_count_)}});
  }
  const bool first = !drained_;
  drained_ = true;
  phase_ = Phase::kReading;
  if (first && callbacks_.drained) callbacks_.drained();
  if (!stopping_) OnDrained();
  Pump();
}

// --- new entries ----------------------------------------------------------------------------

void GroupIntake::ReadNext() {
  if (lingering_until_) {
    if (loop_.clock().Now() < *lingering_until_) {
      linger_timer_->ArmAt(*lingering_until_);
      return;
    }
    lingering_until_.reset();
  }
  const size_t count = ReadCount();
  if (count == 0) return;
  ReadNew(count);
}

void GroupIntake::RouteNew(std::vector<StreamEntry> entries) {
  if (read_linger_.count() > 0 && !entries.empty() && entries.size() < read_asked_) {
    lingering_until_ = loop_.clock().Now() + read_linger_;
  }
  Route(std::move(entries), IntakeSource::kNew);
  EndStep();
}

// --- failures of the read connection ----------------------------------------------------------

void GroupIntake::ReloadScripts() {
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

bool GroupIntake::EndIfRefused(const Status& status, std::string_view op) {
  const std::optional<int64_t> installed = ops_.RefusedOwnership(status);
  if (!installed) return false;
  phase_ = Phase::kFailed;
  EndTimers();
  EndOwnSteps(/*stopping=*/false);
  if (callbacks_.refused) callbacks_.refused(*installed, op);
  MaybeFinishStop();
  return true;
}

void GroupIntake::ReadFailed(const Status& status) {
  // Closed on purpose, stopping, or failed already: nothing more to try.
  if (status.code() == StatusCode::kCancelled || stopping_ || phase_ == Phase::kFailed) {
    return MaybeFinishStop();
  }
  if (EndIfRefused(status, "read")) return;
  if (status.IsServerError("NOSCRIPT")) return ReloadScripts();
  if (status.IsServerError("NOGROUP")) return RecreateGroup();
  if (status.IsServerError("WRONGTYPE")) {
    return Fatal(Status(StatusCode::kFatal, "key \"" + sub_.stream +
                                                "\" is no longer a stream (WRONGTYPE); "
                                                "streamcar leaves it untouched"));
  }
  if (status.code() == StatusCode::kFatal) return Fatal(status);
  if (redis::IsAclRefusal(status)) {
    // The ACL user may not run a command the subscription needs (docs/topologies.md lists
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
    if (drained_) recovery_.Request();
    backoff_timer_->ArmIn(kServerErrorPause);
  }
  // Otherwise the connection reconnects by itself; OnReadConnectionReady resumes.
}

void GroupIntake::RecoveryFailed(const Status& status) {
  read_busy_ = false;
  if (EndIfRefused(status, "claim")) return;
  const bool again = recovery_.AfterFailure(status);
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

void GroupIntake::RecreateGroup() {
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
            if (EndIfRefused(created, "install")) return;
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

}  // namespace streamcar::runtime
