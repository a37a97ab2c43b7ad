#include "sidecar/consumer/settler.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/common/text.h"

namespace streamcar::consumer {
namespace {

// Commands carry at most this many ids, so one call never stalls Redis.
constexpr size_t kIdsPerCommand = 1000;

template <typename F>
void ForChunks(const std::vector<std::string>& ids, const F& emit) {
  for (size_t begin = 0; begin < ids.size(); begin += kIdsPerCommand) {
    const size_t end = std::min(ids.size(), begin + kIdsPerCommand);
    emit(std::vector<std::string>(ids.begin() + static_cast<std::ptrdiff_t>(begin),
                                  ids.begin() + static_cast<std::ptrdiff_t>(end)));
  }
}

const char* FailureName(SettleFailure failure) {
  switch (failure) {
    case SettleFailure::kLostLease:
      return "lost_lease";
    case SettleFailure::kDefinite:
      return "definite";
    case SettleFailure::kAmbiguous:
      return "ambiguous";
  }
  return "definite";
}

// A transaction's replies hold an error: a refusal while queueing, EXECABORT, or a command that
// failed inside EXEC.
std::string FirstError(const std::vector<redis::Reply>& replies, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    redis::ReplyView reply = replies[i].view();
    if (reply.IsError()) return std::string(reply.Str());
    for (size_t k = 0; k < reply.Size(); ++k) {
      if (reply[k].IsError()) return std::string(reply[k].Str());
    }
  }
  return {};
}

}  // namespace

void Settler::Backoff::Failed(SteadyTime now) {
  retry_at = now + ReconnectDelay(streak++, Millis(100), Millis(5000), UnitRandom());
}

Settler::Settler(const config::Subscription& subscription, redis::StreamOps ops,
                 std::unique_ptr<redis::Session> session, Dispatcher* dispatcher,
                 admin::SubscriptionMetrics* metrics, admin::Watchdog::Loop* loop,
                 std::function<void(Status)> on_fatal)
    : sub_(subscription),
      ops_(std::move(ops)),
      session_(std::move(session)),
      dispatcher_(dispatcher),
      metrics_(metrics),
      loop_(loop),
      on_fatal_(std::move(on_fatal)),
      policy_(delivery::OutcomePolicyOf(subscription)),
      gauges_(ops_.ops(), metrics) {}

Settler::~Settler() {
  if (thread_.joinable()) FinishAndJoin(SteadyClock::now());
}

void Settler::Start() {
  const auto now = SteadyClock::now();
  next_keepalive_ = now + sub_.claim.min_idle / 3;
  thread_ = std::thread([this] { Run(); });
}

void Settler::EnableAutoClaim() {
  {
    std::lock_guard lock(mutex_);
    autoclaim_enabled_ = true;
    next_autoclaim_ = SteadyClock::now() + sub_.claim.interval;
  }
  cv_.notify_one();
}

// The settler drains its whole inbox each time it wakes, so only the first input after a drain
// needs to wake it: fewer futex calls on the per-entry path.
void Settler::SubmitAcks(std::vector<std::string> ids) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    wake = inbox_acks_.empty() && inbox_.empty();
    for (const auto& id : ids) settling_ids_.insert(id);
    if (inbox_acks_.empty()) {
      inbox_acks_ = std::move(ids);
    } else {
      for (auto& id : ids) inbox_acks_.push_back(std::move(id));
    }
  }
  if (wake) cv_.notify_one();
}

void Settler::Submit(std::vector<Outcome> outcomes) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    wake = inbox_acks_.empty() && inbox_.empty();
    for (auto& outcome : outcomes) inbox_.push_back(std::move(outcome));
  }
  if (wake) cv_.notify_one();
}

void Settler::DirectAckDeleted(std::vector<std::string> ids) {
  {
    std::lock_guard lock(mutex_);
    for (auto& id : ids) inbox_direct_acks_.push_back(std::move(id));
  }
  cv_.notify_one();
}

bool Settler::ExhaustedOnArrival(const StreamEntry& entry) const {
  return delivery::ExhaustedOnArrival(policy_, entry.attempts);
}

Settler::DeadJob Settler::ExhaustedJob(StreamEntry entry) {
  DeadJob job;
  job.reason = delivery::DeadLetterReason::kMaxAttempts;
  job.meta = {std::string(delivery::Name(job.reason)), "none",
              "delivered " + std::to_string(entry.attempts - 1) +
                  " times without an outcome (a consumer stopped during each)",
              entry.attempts, SystemClock::Instance().WallMillis()};
  job.direct_entry = std::move(entry);
  return job;
}

void Settler::DeadLetterExhausted(StreamEntry entry) {
  {
    std::lock_guard lock(mutex_);
    settling_ids_.insert(entry.id);
    inbox_direct_dead_.push_back(ExhaustedJob(std::move(entry)));
  }
  cv_.notify_one();
}

bool Settler::Settling(const std::string& id) const {
  std::lock_guard lock(mutex_);
  return settling_ids_.contains(id);
}

void Settler::ForgetSettling(const std::vector<std::string>& ids) {
  std::lock_guard lock(mutex_);
  for (const auto& id : ids) {
    if (auto it = settling_ids_.find(id); it != settling_ids_.end()) settling_ids_.erase(it);
  }
}

void Settler::BeginDraining() {
  std::lock_guard lock(mutex_);
  draining_ = true;
}

void Settler::FinishAndJoin(SteadyTime deadline) {
  {
    std::lock_guard lock(mutex_);
    draining_ = true;
    finishing_ = true;
    finish_deadline_ = deadline;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Settler::CountFailure(SettleFailure failure, size_t n) {
  if (n == 0) return;
  metrics_->SettleFailed(FailureName(failure))->Increment(static_cast<double>(n));
}

void Settler::Release(HeldEntry* entry) { dispatcher_->Release(entry); }

bool Settler::HasDueWork(SteadyTime now) const {
  return ((!acks_.empty() || !direct_acks_.empty()) && ack_backoff_.Due(now)) ||
         (!dead_.empty() && dead_backoff_.Due(now)) ||
         (!claims_.empty() && claim_backoff_.Due(now));
}

SteadyTime Settler::NextWake(SteadyTime now) const {
  SteadyTime wake = std::min({next_keepalive_, gauges_.NextDue(), now + Millis(1000)});
  if (autoclaim_enabled_ && !draining_) wake = std::min(wake, next_autoclaim_);
  if (!draining_) {
    if (auto retry = dispatcher_->NextRetryAt()) wake = std::min(wake, *retry);
  }
  if (!acks_.empty() || !direct_acks_.empty()) wake = std::min(wake, ack_backoff_.retry_at);
  if (!dead_.empty()) wake = std::min(wake, dead_backoff_.retry_at);
  if (!claims_.empty()) wake = std::min(wake, claim_backoff_.retry_at);
  return std::max(wake, now);
}

void Settler::TakeInputs(SteadyTime now) {
  std::vector<Outcome> outcomes;
  {
    std::unique_lock lock(mutex_);
    if (!HasDueWork(now)) {
      cv_.wait_until(lock, NextWake(now), [this] {
        return !inbox_.empty() || !inbox_acks_.empty() || !inbox_direct_acks_.empty() ||
               !inbox_direct_dead_.empty() || finishing_;
      });
    }
    outcomes.swap(inbox_);
    if (acks_.empty()) {
      acks_.swap(inbox_acks_);
    } else {
      for (auto& id : inbox_acks_) acks_.push_back(std::move(id));
      inbox_acks_.clear();
    }
    for (auto& id : inbox_direct_acks_) direct_acks_.push_back(std::move(id));
    inbox_direct_acks_.clear();
    for (auto& job : inbox_direct_dead_) dead_.push_back(std::move(job));
    inbox_direct_dead_.clear();
  }
  const auto after = SteadyClock::now();
  for (auto& outcome : outcomes) {
    auto& decision = outcome.decision;
    HeldEntry* held = outcome.entry;
    if (held->lost && decision.action != delivery::Action::kAck) {
      // A peer reclaimed it while it was in flight (counted then): only a 2xx is still ours.
      LogWarn("result dropped: the entry was reclaimed by another consumer (lost lease)",
              {{"subscription", sub_.name}, {"id", held->entry.id}});
      Release(held);
      continue;
    }
    switch (decision.action) {
      case delivery::Action::kAck:  // workers use SubmitAcks; kept correct all the same
        acks_.push_back(held->entry.id);
        {
          std::lock_guard lock(mutex_);
          settling_ids_.insert(held->entry.id);
        }
        Release(held);
        break;
      case delivery::Action::kRetry:
        dispatcher_->ScheduleRetry(held, after + decision.delay);
        break;
      case delivery::Action::kDeadLetter: {
        dispatcher_->MarkSettling(held);
        DeadJob job;
        job.held = held;
        job.reason = decision.reason;
        job.meta.reason = std::string(delivery::Name(decision.reason));
        job.meta.status = decision.status_text;
        job.meta.error = decision.error;
        job.meta.attempts = held->entry.attempts;
        job.meta.time_ms = SystemClock::Instance().WallMillis();
        dead_.push_back(std::move(job));
        break;
      }
      case delivery::Action::kHold:
        break;  // workers keep held entries themselves; never submitted
    }
  }
}

void Settler::AppendAckCommands(const std::vector<std::string>& ids, bool delivered,
                                std::vector<redis::Command>* out,
                                std::vector<AckChunk>* chunks) const {
  ForChunks(ids, [&](const std::vector<std::string>& chunk) {
    AckChunk span;
    span.begin = out->size();
    span.delivered = delivered;
    switch (ack_mode_.load()) {
      case AckMode::kAckOnly:
        out->push_back(ops_.Ack(chunk));
        break;
      case AckMode::kAckDel:
        out->push_back(ops_.AckDelete(chunk));
        break;
      case AckMode::kAckThenDelete:
        // XACK and XDEL together or not at all.
        out->emplace_back("MULTI");
        out->push_back(ops_.Ack(chunk));
        out->push_back(ops_.Delete(chunk));
        out->emplace_back("EXEC");
        break;
    }
    span.end = out->size();
    span.ids = chunk;
    chunks->push_back(std::move(span));
  });
}

void Settler::SettleAmbiguous(const std::vector<AckChunk>& acks, size_t dead_sent,
                              size_t claims_sent, const std::string& error) {
  // SPEC 4.3 "ambiguous": the commands may or may not have been applied. The entries are let go
  // without another write; what was not applied is still pending, and the reader reads this
  // consumer's pending list again to deliver it.
  size_t released = 0;
  for (const auto& chunk : acks) {
    released += chunk.ids.size();
    ForgetSettling(chunk.ids);
  }
  if (!acks.empty()) {  // every queued acknowledgement was in the pipeline
    acks_.clear();
    direct_acks_.clear();
  }
  for (size_t k = 0; k < dead_sent; ++k) {
    auto& job = dead_[k];
    if (job.held != nullptr) {
      Release(job.held);
    } else {
      ForgetSettling({job.direct_entry.id});
    }
  }
  dead_.erase(dead_.begin(), dead_.begin() + static_cast<std::ptrdiff_t>(dead_sent));
  for (size_t k = 0; k < claims_sent; ++k) Release(claims_[k]);
  claims_.erase(claims_.begin(), claims_.begin() + static_cast<std::ptrdiff_t>(claims_sent));
  released += dead_sent + claims_sent;
  CountFailure(SettleFailure::kAmbiguous, released);
  if (released > 0) {
    recovery_requested_ = true;
    LogWarn(
        "settlement ambiguous: the connection failed after sending; entries released, the "
        "pending list will bring back what was not applied",
        {{"subscription", sub_.name},
         {"class", "ambiguous"},
         {"entries", static_cast<int64_t>(released)},
         {"error", error}});
  }
}

void Settler::ApplyAcks(const std::vector<redis::Reply>& replies,
                        const std::vector<AckChunk>& chunks, SteadyTime now) {
  std::vector<std::string> kept_delivered, kept_direct;
  size_t acked = 0;
  std::string error;
  const int64_t now_ms = SystemClock::Instance().WallMillis();
  for (const auto& chunk : chunks) {
    std::string failed = FirstError(replies, chunk.begin, chunk.end);
    if (!failed.empty()) {
      // SPEC 4.3 "definite": not applied; the acknowledgement is tried again after a delay.
      error = failed;
      auto& kept = chunk.delivered ? kept_delivered : kept_direct;
      kept.insert(kept.end(), chunk.ids.begin(), chunk.ids.end());
      continue;
    }
    acked += chunk.ids.size();
    ForgetSettling(chunk.ids);
    if (!chunk.delivered) continue;
    for (const auto& entry_id : chunk.ids) {
      if (auto id = ParseEntryId(entry_id)) {
        metrics_->end_to_end->Observe(static_cast<double>(now_ms - static_cast<int64_t>(id->ms)) /
                                      1000.0);
      }
    }
  }
  metrics_->acked->Increment(static_cast<double>(acked));
  if (chunks.empty()) return;  // not due: nothing was sent
  // Every queued acknowledgement was in the pipeline; what failed is queued again.
  acks_ = std::move(kept_delivered);
  direct_acks_ = std::move(kept_direct);
  if (acks_.empty() && direct_acks_.empty()) {
    ack_backoff_.Succeeded();
    return;
  }
  CountFailure(SettleFailure::kDefinite, acks_.size() + direct_acks_.size());
  LogError("acknowledgement refused by Redis; will retry",
           {{"subscription", sub_.name}, {"class", "definite"}, {"error", error}});
  ack_backoff_.Failed(now);
}

void Settler::ApplyDeadLetters(const std::vector<redis::Reply>& replies, size_t begin, size_t count,
                               SteadyTime now) {
  std::vector<DeadJob> kept;
  for (size_t k = 0; k < count; ++k) {
    auto& job = dead_[k];
    redis::ReplyView reply = replies[begin + k].view();
    if (reply.IsError()) {
      if (redis::IsNoScript(reply)) {
        scripts_loaded_for_ = 0;  // load again, then retry
      } else {
        // "definite": nothing was written and nothing acknowledged (the script stops at the
        // failing command). The entry stays held and pending until the step succeeds.
        CountFailure(SettleFailure::kDefinite);
        LogError("cannot write dead letter; the entry stays pending and is tried again",
                 {{"subscription", sub_.name},
                  {"id", job.entry().id},
                  {"class", "definite"},
                  {"dead_letter_stream", sub_.dead_letter.stream},
                  {"error", reply.Str()}});
      }
      kept.push_back(std::move(job));
      continue;
    }
    if (reply.Integer() == 1) {
      LogWarn("entry dead-lettered", {{"subscription", sub_.name},
                                      {"id", job.entry().id},
                                      {"reason", job.meta.reason},
                                      {"attempts", job.meta.attempts},
                                      {"status", job.meta.status}});
      metrics_->DeadLettered(job.reason)->Increment();
      metrics_->acked->Increment();
    } else {
      CountFailure(SettleFailure::kLostLease);
      LogWarn("dead letter not written: the entry is no longer this consumer's (lost lease)",
              {{"subscription", sub_.name}, {"id", job.entry().id}, {"class", "lost_lease"}});
    }
    if (job.held != nullptr) {
      Release(job.held);
    } else {
      ForgetSettling({job.direct_entry.id});
    }
  }
  dead_.erase(dead_.begin(), dead_.begin() + static_cast<std::ptrdiff_t>(count));
  if (kept.empty()) {
    dead_backoff_.Succeeded();
    return;
  }
  dead_.insert(dead_.begin(), std::make_move_iterator(kept.begin()),
               std::make_move_iterator(kept.end()));
  dead_backoff_.Failed(now);
}

void Settler::ApplyRetryClaims(const std::vector<redis::Reply>& replies, size_t begin,
                               const std::vector<std::vector<HeldEntry*>>& chunks, SteadyTime now) {
  std::vector<HeldEntry*> kept;
  for (size_t c = 0; c < chunks.size(); ++c) {
    redis::ReplyView reply = replies[begin + c].view();
    if (reply.IsError()) {
      // An error means "unknown", never "gone" (SPEC 3.2): keep every entry and try again.
      if (redis::IsNoScript(reply)) {
        scripts_loaded_for_ = 0;
      } else {
        CountFailure(SettleFailure::kDefinite, chunks[c].size());
        LogError("retry claim refused by Redis; the entries stay held and are tried again",
                 {{"subscription", sub_.name}, {"class", "definite"}, {"error", reply.Str()}});
      }
      kept.insert(kept.end(), chunks[c].begin(), chunks[c].end());
      continue;
    }
    auto result = redis::StreamOps::ParseRetryClaim(reply);
    std::unordered_map<std::string, bool> claimed;  // id -> payload gone (Redis 6.2 nil)
    for (const auto& entry : result.entries) claimed[entry.id] = entry.deleted;
    std::unordered_set<std::string> lost(result.lost_ids.begin(), result.lost_ids.end());
    for (HeldEntry* entry : chunks[c]) {
      if (lost.contains(entry->entry.id)) {
        CountFailure(SettleFailure::kLostLease);
        LogWarn("retry not claimed: the entry is another consumer's now (lost lease)",
                {{"subscription", sub_.name}, {"id", entry->entry.id}, {"class", "lost_lease"}});
        Release(entry);
        continue;
      }
      auto it = claimed.find(entry->entry.id);
      if (it != claimed.end() && !it->second) {
        entry->entry.attempts += 1;
        dispatcher_->Requeue(entry);
        continue;
      }
      // Ours, but its payload is gone (deleted or trimmed while it waited): Redis 7 drops it
      // from the pending list on the claim; the acknowledgement covers older servers. It is
      // never POSTed again.
      metrics_->deleted_entries->Increment();
      direct_acks_.push_back(entry->entry.id);
      Release(entry);
    }
  }
  if (kept.empty()) {
    claim_backoff_.Succeeded();
  } else {
    claim_backoff_.Failed(now);
  }
  claims_ = std::move(kept);
}

void Settler::ApplyKeepAlive(const std::vector<redis::Reply>& replies, size_t begin, size_t end,
                             SteadyTime now) {
  bool failed = false;
  for (size_t i = begin; i < end; ++i) {
    redis::ReplyView reply = replies[i].view();
    if (reply.IsError()) {
      if (redis::IsNoScript(reply)) scripts_loaded_for_ = 0;
      if (!failed) {
        LogWarn("lease keepalive refused by Redis; trying again soon",
                {{"subscription", sub_.name}, {"error", reply.Str()}});
      }
      failed = true;
      continue;
    }
    for (const auto& id : redis::StreamOps::ParseIds(reply)) {
      if (dispatcher_->MarkLost(id) == Dispatcher::LostResult::kIgnored) continue;
      CountFailure(SettleFailure::kLostLease);
      LogWarn("lease lost: another consumer owns the entry now; it is not delivered again here",
              {{"subscription", sub_.name}, {"id", id}, {"class", "lost_lease"}});
    }
  }
  if (failed) {
    keepalive_backoff_.Failed(now);
    next_keepalive_ = std::min(now + sub_.claim.min_idle / 3, keepalive_backoff_.retry_at);
  } else {
    keepalive_backoff_.Succeeded();
    next_keepalive_ = now + sub_.claim.min_idle / 3;
  }
}

bool Settler::Flush(SteadyTime now) {
  // Connected even when idle: readiness counts this connection, and beats need it.
  if (Status s = session_->ConnectOnce(&connect_retry_in_); !s.ok()) {
    if (s.code() == StatusCode::kFatal) on_fatal_(s);
    return false;
  }
  connect_retry_in_ = Millis(0);
  std::vector<redis::Command> commands;
  // Scripts are loaded once per connection, in front of the first pipeline that may use them.
  const bool load_scripts = scripts_loaded_for_ != session_->generation();
  if (load_scripts) {
    for (const auto* script : redis::StreamOps::Scripts()) commands.push_back(script->Load());
  }
  const size_t loads = commands.size();

  std::vector<AckChunk> ack_chunks;
  if (ack_backoff_.Due(now)) {
    AppendAckCommands(acks_, /*delivered=*/true, &commands, &ack_chunks);
    AppendAckCommands(direct_acks_, /*delivered=*/false, &commands, &ack_chunks);
  }

  const size_t dead_begin = commands.size();
  const size_t dead_count = dead_backoff_.Due(now) ? dead_.size() : 0;
  for (size_t k = 0; k < dead_count; ++k) {
    commands.push_back(ops_.DeadLetter(sub_.dead_letter.stream, sub_.dead_letter.max_len,
                                       dead_[k].entry(), dead_[k].meta, ack_mode_.load()));
  }

  const size_t claim_begin = commands.size();
  std::vector<std::vector<HeldEntry*>> claim_chunks;
  if (claim_backoff_.Due(now)) {
    for (size_t begin = 0; begin < claims_.size(); begin += kIdsPerCommand) {
      const size_t end = std::min(claims_.size(), begin + kIdsPerCommand);
      claim_chunks.emplace_back(claims_.begin() + static_cast<std::ptrdiff_t>(begin),
                                claims_.begin() + static_cast<std::ptrdiff_t>(end));
      std::vector<std::string> ids;
      for (auto* entry : claim_chunks.back()) ids.push_back(entry->entry.id);
      commands.push_back(ops_.ClaimForRetry(ids));
    }
  }
  size_t claims_sent = 0;
  for (const auto& chunk : claim_chunks) claims_sent += chunk.size();

  const size_t keepalive_begin = commands.size();
  const bool keepalive_due = now >= next_keepalive_;
  if (keepalive_due) {
    ForChunks(dispatcher_->HeldIds(), [&](const std::vector<std::string>& chunk) {
      commands.push_back(ops_.KeepAlive(chunk));
    });
  }
  const size_t keepalive_end = commands.size();
  if (commands.empty()) {
    if (keepalive_due) next_keepalive_ = now + sub_.claim.min_idle / 3;
    return true;
  }
  auto replies = session_->RunPipeline(commands);
  if (!replies.ok()) {
    SettleAmbiguous(ack_chunks, dead_count, claims_sent, replies.status().message());
    return false;
  }
  if (load_scripts) {
    const std::string error = FirstError(*replies, 0, loads);
    if (error.empty()) {
      scripts_loaded_for_ = session_->generation();
    } else {
      LogError("cannot load scripts into Redis", {{"subscription", sub_.name}, {"error", error}});
    }
  }
  ApplyAcks(*replies, ack_chunks, now);
  ApplyDeadLetters(*replies, dead_begin, dead_count, now);
  if (!claim_chunks.empty()) ApplyRetryClaims(*replies, claim_begin, claim_chunks, now);
  if (keepalive_due) ApplyKeepAlive(*replies, keepalive_begin, keepalive_end, now);
  return true;
}

void Settler::UndoUnpostedReads() {
  const std::vector<std::string> ids = dispatcher_->UnpostedIds();
  if (ids.empty()) return;
  // One more connection attempt (bounded by connect_timeout) if a blip took the connection.
  Millis retry_in{0};
  if (Status s = session_->ConnectOnce(&retry_in); !s.ok()) {
    LogWarn("shutdown: cannot take back the delivery count of entries never delivered",
            {{"subscription", sub_.name}, {"error", s.message()}});
    return;
  }
  std::vector<redis::Command> commands;
  if (scripts_loaded_for_ != session_->generation()) {
    for (const auto* script : redis::StreamOps::Scripts()) commands.push_back(script->Load());
  }
  const size_t first = commands.size();
  ForChunks(ids, [&](const std::vector<std::string>& chunk) {
    commands.push_back(ops_.UndoReads(chunk));
  });
  auto replies = session_->RunPipeline(commands);
  int64_t undone = 0;
  std::string error =
      replies.ok() ? FirstError(*replies, 0, replies->size()) : replies.status().message();
  if (replies.ok()) {
    for (size_t i = first; i < replies->size(); ++i) undone += (*replies)[i].view().Integer();
  }
  if (!error.empty()) {
    LogWarn("shutdown: cannot take back the delivery count of entries never delivered",
            {{"subscription", sub_.name}, {"error", error}});
  }
  LogInfo("shutdown: entries read but never delivered keep their delivery count",
          {{"subscription", sub_.name}, {"entries", undone}});
}

void Settler::RunAutoClaim() {
  while (true) {
    const size_t room = dispatcher_->Room();
    if (room == 0) return;  // keep the cursor: continue on the next beat
    const int count =
        static_cast<int>(std::min<size_t>(room, static_cast<size_t>(sub_.claim.count)));
    auto result = ops_.AutoClaim(*session_, sub_.claim.min_idle, autoclaim_cursor_, count);
    if (!result.ok()) {
      if (!result.status().IsServerError("NOGROUP")) {
        LogWarn("reclaim beat failed",
                {{"subscription", sub_.name}, {"error", result.status().message()}});
      }
      return;
    }
    if (!result->deleted_ids.empty()) {
      metrics_->deleted_entries->Increment(static_cast<double>(result->deleted_ids.size()));
      for (auto& id : result->deleted_ids) direct_acks_.push_back(std::move(id));
    }
    std::vector<StreamEntry> deliverable;
    for (auto& entry : result->entries) {
      if (ExhaustedOnArrival(entry)) {
        dead_.push_back(ExhaustedJob(std::move(entry)));
        continue;
      }
      deliverable.push_back(std::move(entry));
    }
    if (!deliverable.empty()) {
      LogInfo("reclaimed idle entries",
              {{"subscription", sub_.name}, {"count", static_cast<int64_t>(deliverable.size())}});
    }
    const size_t admitted = dispatcher_->Admit(std::move(deliverable));
    metrics_->claimed_autoclaim->Increment(static_cast<double>(admitted));
    autoclaim_cursor_ = result->next_cursor;
    if (autoclaim_cursor_ == "0-0") return;
  }
}

void Settler::RefreshGauges(SteadyTime now) {
  // At most two round trips: the group's info, then (when Redis has no lag) the lag count.
  for (auto commands = gauges_.Commands(now); !commands.empty(); commands = gauges_.Commands(now)) {
    auto replies = session_->RunPipeline(commands);
    gauges_.Apply(
        replies.ok() ? std::span<const redis::Reply>(*replies) : std::span<const redis::Reply>(),
        now);
  }
}

void Settler::Run() {
  int failures = 0;
  while (true) {
    loop_->Beat();
    auto now = SteadyClock::now();
    TakeInputs(now);
    now = SteadyClock::now();
    bool finishing = false;
    bool draining = false;
    bool autoclaim = false;
    SteadyTime deadline{};
    {
      std::lock_guard lock(mutex_);
      finishing = finishing_;
      draining = draining_;
      deadline = finish_deadline_;
      autoclaim = autoclaim_enabled_;
    }
    if (draining) {
      // A retry claim counts a delivery; once shutdown has begun none follows, so none is
      // claimed (SPEC 3.2). The entries stay pending for this consumer's restart or a peer.
      claims_.clear();
    } else {
      for (auto* entry : dispatcher_->TakeDueRetries(now)) claims_.push_back(entry);
    }
    const bool flushed = Flush(now);
    if (flushed && session_->connected()) {
      failures = 0;
      if (!draining && autoclaim && now >= next_autoclaim_) {
        RunAutoClaim();
        next_autoclaim_ = SteadyClock::now() + sub_.claim.interval;
      }
      RefreshGauges(now);
    }
    gauges_.SetInflight(dispatcher_->Held());

    if (finishing) {
      bool idle = false;
      {
        std::lock_guard lock(mutex_);
        idle = acks_.empty() && dead_.empty() && direct_acks_.empty() && inbox_.empty() &&
               inbox_acks_.empty() && inbox_direct_acks_.empty() && inbox_direct_dead_.empty();
      }
      if (idle || SteadyClock::now() >= deadline) {
        if (!idle) {
          LogWarn("shutdown: outcomes not settled in time stay pending for a restart or a peer",
                  {{"subscription", sub_.name},
                   {"acks", static_cast<int64_t>(acks_.size() + direct_acks_.size())},
                   {"dead_letters", static_cast<int64_t>(dead_.size())}});
        }
        UndoUnpostedReads();
        return;
      }
    }
    if (!flushed) {
      // Redis is away: wait a capped, jittered step (the one the connection announced in its log
      // line when it could not connect), but wake early for shutdown.
      Millis delay = ReconnectDelay(failures++, Millis(100), Millis(5000), UnitRandom());
      if (connect_retry_in_.count() > 0) delay = std::exchange(connect_retry_in_, Millis(0));
      std::unique_lock lock(mutex_);
      auto until = SteadyClock::now() + delay;
      if (finishing_) until = std::min(until, finish_deadline_);
      // New outcomes do not cut the backoff short (they are kept and flushed after it); only
      // the start of shutdown does.
      const bool was_finishing = finishing_;
      cv_.wait_until(lock, until, [&] { return finishing_ != was_finishing; });
    }
  }
}

}  // namespace streamcar::consumer
