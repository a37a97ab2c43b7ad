#include "sidecar/consumer/settler.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <algorithm>
#include <set>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/common/text.h"

namespace streamcar::consumer {
namespace {

// Commands carry at most this many ids, so one call never stalls Redis.
constexpr size_t kIdsPerCommand = 1000;
constexpr Millis kGaugeInterval{5000};
// When Redis cannot say the lag (XINFO lag is nil, e.g. after unread entries were trimmed), the
// gauge counts the entries after the group's position itself: at most this many, at most once
// a minute, because the count transfers the entries.
constexpr int64_t kLagCountCap = 10'000;
constexpr Millis kLagCountInterval{60000};

template <typename F>
void ForChunks(const std::vector<std::string>& ids, const F& emit) {
  for (size_t begin = 0; begin < ids.size(); begin += kIdsPerCommand) {
    const size_t end = std::min(ids.size(), begin + kIdsPerCommand);
    emit(std::vector<std::string>(ids.begin() + static_cast<std::ptrdiff_t>(begin),
                                  ids.begin() + static_cast<std::ptrdiff_t>(end)));
  }
}

}  // namespace

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
      policy_(delivery::OutcomePolicyOf(subscription)) {}

Settler::~Settler() {
  if (thread_.joinable()) FinishAndJoin(SteadyClock::now());
}

void Settler::Start() {
  const auto now = SteadyClock::now();
  next_keepalive_ = now + sub_.claim.min_idle / 3;
  next_gauges_ = now;
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
  job.meta = {"max_attempts", "none",
              "delivered " + std::to_string(entry.attempts - 1) +
                  " times without an outcome (a consumer stopped during each)",
              entry.attempts, SystemClock::Instance().WallMillis()};
  job.direct_entry = std::move(entry);
  return job;
}

void Settler::DeadLetterExhausted(StreamEntry entry) {
  {
    std::lock_guard lock(mutex_);
    inbox_direct_dead_.push_back(ExhaustedJob(std::move(entry)));
  }
  cv_.notify_one();
}

void Settler::FinishAndJoin(SteadyTime deadline) {
  {
    std::lock_guard lock(mutex_);
    finishing_ = true;
    finish_deadline_ = deadline;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

SteadyTime Settler::NextWake(SteadyTime now) const {
  SteadyTime wake = std::min({next_keepalive_, next_gauges_, now + Millis(1000)});
  if (autoclaim_enabled_) wake = std::min(wake, next_autoclaim_);
  if (auto retry = dispatcher_->NextRetryAt()) wake = std::min(wake, *retry);
  return wake;
}

void Settler::TakeInputs(SteadyTime now) {
  std::vector<Outcome> outcomes;
  {
    std::unique_lock lock(mutex_);
    const bool has_backlog = !acks_.empty() || !dead_.empty() || !direct_acks_.empty();
    if (!has_backlog) {
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
    switch (decision.action) {
      case delivery::Action::kAck:  // workers use SubmitAcks; kept correct all the same
        acks_.push_back(outcome.entry->entry.id);
        dispatcher_->Release(outcome.entry);
        break;
      case delivery::Action::kRetry:
        dispatcher_->ScheduleRetry(outcome.entry, after + decision.delay);
        break;
      case delivery::Action::kDeadLetter: {
        dispatcher_->MarkSettling(outcome.entry);
        DeadJob job;
        job.held = outcome.entry;
        job.meta.reason = decision.reason;
        job.meta.status = decision.status_text;
        job.meta.error = decision.error;
        job.meta.attempts = outcome.entry->entry.attempts;
        job.meta.time_ms = SystemClock::Instance().WallMillis();
        dead_.push_back(std::move(job));
        break;
      }
      case delivery::Action::kHold:
        break;  // workers keep held entries themselves; never submitted
    }
  }
}

void Settler::AppendAckCommands(const std::vector<std::string>& ids,
                                std::vector<redis::Command>* out, bool in_transaction) const {
  ForChunks(ids, [&](const std::vector<std::string>& chunk) {
    switch (ack_mode_.load()) {
      case AckMode::kAckOnly:
        out->push_back(ops_.Ack(chunk));
        break;
      case AckMode::kAckDel:
        out->push_back(ops_.AckDelete(chunk));
        break;
      case AckMode::kAckThenDelete:
        // XACK and XDEL together or not at all; a MULTI cannot nest, so inside one it is omitted.
        if (!in_transaction) out->emplace_back("MULTI");
        out->push_back(ops_.Ack(chunk));
        out->push_back(ops_.Delete(chunk));
        if (!in_transaction) out->emplace_back("EXEC");
        break;
    }
  });
}

bool Settler::Flush(SteadyTime now) {
  const bool keepalive_due = now >= next_keepalive_;
  std::vector<std::string> ack_ids;
  ack_ids.reserve(acks_.size() + direct_acks_.size());
  ack_ids.insert(ack_ids.end(), acks_.begin(), acks_.end());
  for (const auto& id : direct_acks_) ack_ids.push_back(id);

  std::vector<redis::Command> commands;
  AppendAckCommands(ack_ids, &commands);
  const size_t ack_commands = commands.size();

  // Where each dead letter's MULTI and EXEC sit in the pipeline.
  std::vector<std::pair<size_t, size_t>> dead_spans;
  for (const auto& job : dead_) {
    const size_t multi = commands.size();
    commands.emplace_back("MULTI");
    commands.push_back(ops_.DeadLetterAdd(sub_.dead_letter.stream, sub_.dead_letter.max_len,
                                          job.entry(), job.meta));
    AppendAckCommands({job.entry().id}, &commands, /*in_transaction=*/true);
    commands.emplace_back("EXEC");
    dead_spans.emplace_back(multi, commands.size() - 1);
  }

  std::vector<std::string> claim_ids;
  for (auto* entry : claims_) claim_ids.push_back(entry->entry.id);
  const size_t claim_begin = commands.size();
  ForChunks(claim_ids, [&](const std::vector<std::string>& chunk) {
    commands.push_back(ops_.ClaimForRetry(chunk));
  });
  const size_t claim_end = commands.size();

  if (keepalive_due) {
    ForChunks(dispatcher_->HeldIds(), [&](const std::vector<std::string>& chunk) {
      commands.push_back(ops_.KeepAlive(chunk));
    });
  }
  // Connected even when idle: readiness counts this connection, and beats need it.
  Millis retry_in{0};
  if (Status s = session_->ConnectOnce(&retry_in); !s.ok()) {
    if (s.code() == StatusCode::kFatal) on_fatal_(s);
    return false;
  }
  if (commands.empty()) {
    if (keepalive_due) next_keepalive_ = now + sub_.claim.min_idle / 3;
    return true;
  }
  auto replies = session_->RunPipeline(commands);
  if (!replies.ok()) {
    LogWarn("redis write failed; will retry after reconnect",
            {{"subscription", sub_.name}, {"error", replies.status().message()}});
    return false;
  }

  // Acknowledgements.
  for (size_t i = 0; i < ack_commands; ++i) {
    if ((*replies)[i].IsError()) {
      LogError("acknowledgement failed",
               {{"subscription", sub_.name}, {"error", (*replies)[i].view().Str()}});
    }
  }
  const int64_t now_ms = SystemClock::Instance().WallMillis();
  for (const auto& entry_id : acks_) {
    if (auto id = ParseEntryId(entry_id)) {
      metrics_->end_to_end->Observe(static_cast<double>(now_ms - static_cast<int64_t>(id->ms)) /
                                    1000.0);
    }
  }
  metrics_->acked->Increment(static_cast<double>(ack_ids.size()));
  acks_.clear();
  direct_acks_.clear();

  // Dead letters: each its own MULTI/EXEC.
  for (size_t k = 0; k < dead_.size(); ++k) {
    auto& job = dead_[k];
    // Replies: MULTI's OK, one QUEUED (or a refusal such as OOM) per command, then EXEC's array
    // (or EXECABORT when a command was refused while queueing).
    const auto [multi, exec_index] = dead_spans[k];
    redis::ReplyView exec = (*replies)[exec_index].view();
    std::string error;
    for (size_t q = multi + 1; q < exec_index && error.empty(); ++q) {
      if ((*replies)[q].IsError()) error = std::string((*replies)[q].view().Str());
    }
    for (size_t e = 0; error.empty() && e < exec.Size(); ++e) {
      if (exec[e].IsError()) error = std::string(exec[e].Str());
    }
    if (error.empty() && !exec.IsArray())
      error = exec.IsError() ? std::string(exec.Str()) : "transaction aborted";
    const bool written = error.empty();
    if (written) {
      LogWarn("entry dead-lettered", {{"subscription", sub_.name},
                                      {"id", job.entry().id},
                                      {"reason", job.meta.reason},
                                      {"attempts", job.meta.attempts},
                                      {"status", job.meta.status}});
      if (auto* counter = metrics_->DeadLettered(job.meta.reason)) counter->Increment();
      metrics_->acked->Increment();
    } else {
      // Not written (out of memory, the DLQ key has the wrong type, ...): the entry stays
      // pending in Redis and comes back through a reclaim; nothing is lost.
      LogError("cannot write dead letter; the entry stays pending",
               {{"subscription", sub_.name},
                {"id", job.entry().id},
                {"dead_letter_stream", sub_.dead_letter.stream},
                {"error", error}});
    }
    if (job.held != nullptr) dispatcher_->Release(job.held);
  }
  dead_.clear();

  // Retry claims: what came back counts one more delivery; what did not is gone.
  std::set<std::string> returned;
  std::map<std::string, bool> returned_deleted;
  for (size_t i = claim_begin; i < claim_end; ++i) {
    if ((*replies)[i].IsError()) {
      LogError("retry claim failed",
               {{"subscription", sub_.name}, {"error", (*replies)[i].view().Str()}});
      continue;
    }
    for (auto& entry : redis::StreamOps::ParseEntries((*replies)[i].view())) {
      returned_deleted[entry.id] = entry.deleted;
    }
  }
  for (auto* entry : claims_) {
    auto it = returned_deleted.find(entry->entry.id);
    if (it != returned_deleted.end() && !it->second) {
      entry->entry.attempts += 1;
      dispatcher_->Requeue(entry);
      continue;
    }
    // Deleted or trimmed while waiting, or no longer pending: acknowledge (harmless if already
    // gone from the PEL) and count it; it is not POSTed again.
    metrics_->deleted_entries->Increment();
    direct_acks_.push_back(entry->entry.id);
    dispatcher_->Release(entry);
  }
  claims_.clear();
  if (keepalive_due) next_keepalive_ = now + sub_.claim.min_idle / 3;
  return true;
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

void Settler::RefreshGauges() {
  auto info = ops_.Info(*session_);
  if (!info.ok()) return;  // NOGROUP before the reader re-creates the group, or an outage
  metrics_->pending->Set(static_cast<double>(info->pending));
  if (info->lag) {
    metrics_->lag->Set(static_cast<double>(*info->lag));
  } else if (!info->last_delivered_id.empty() && SteadyClock::now() >= next_lag_count_) {
    next_lag_count_ = SteadyClock::now() + kLagCountInterval;
    auto count = ops_.CountAfter(*session_, info->last_delivered_id, kLagCountCap);
    if (count.ok()) metrics_->lag->Set(static_cast<double>(*count));
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
    bool autoclaim = false;
    SteadyTime deadline{};
    {
      std::lock_guard lock(mutex_);
      finishing = finishing_;
      deadline = finish_deadline_;
      autoclaim = autoclaim_enabled_;
    }
    if (finishing) {
      // A retry claim counts a delivery; at shutdown none follows, so none is claimed. The
      // entries stay pending for this consumer's restart or a peer.
      claims_.clear();
    } else {
      for (auto* entry : dispatcher_->TakeDueRetries(now)) claims_.push_back(entry);
    }
    const bool flushed = Flush(now);
    if (flushed && session_->connected()) {
      failures = 0;
      if (!finishing && autoclaim && now >= next_autoclaim_) {
        RunAutoClaim();
        next_autoclaim_ = SteadyClock::now() + sub_.claim.interval;
      }
      if (now >= next_gauges_) {
        RefreshGauges();
        next_gauges_ = SteadyClock::now() + kGaugeInterval;
      }
    }
    metrics_->inflight->Set(static_cast<double>(dispatcher_->Held()));

    if (finishing) {
      std::lock_guard lock(mutex_);
      const bool idle = acks_.empty() && dead_.empty() && direct_acks_.empty() && inbox_.empty() &&
                        inbox_acks_.empty() && inbox_direct_acks_.empty() &&
                        inbox_direct_dead_.empty();
      if (idle) return;
      if (SteadyClock::now() >= deadline) {
        LogWarn("shutdown: outcomes not settled in time stay pending for a restart or a peer",
                {{"subscription", sub_.name},
                 {"acks", static_cast<int64_t>(acks_.size() + direct_acks_.size())},
                 {"dead_letters", static_cast<int64_t>(dead_.size())}});
        return;
      }
    }
    if (!flushed) {
      // Redis is away: wait a capped, jittered step, but wake early for shutdown.
      const Millis delay = ReconnectDelay(failures++, Millis(100), Millis(5000), UnitRandom());
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
