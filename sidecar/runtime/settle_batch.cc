#include "sidecar/runtime/settle_batch.h"

#include <algorithm>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "sidecar/redis/connection.h"
#include "sidecar/redis/replica_wait.h"
#include "sidecar/redis/settle_scripts.h"

namespace streamcar::runtime {
namespace {

using Step = SettlePlan::Step;
using Span = SettlePlan::Span;

// Appends one span per chunk of `ids`, each from `build(chunk)`.
template <typename Build>
void AddChunked(SettlePlan* plan, Step step, const std::vector<std::string>& ids,
                const Build& build) {
  for (size_t begin = 0; begin < ids.size(); begin += kIdsPerCommand) {
    const size_t end = std::min(ids.size(), begin + kIdsPerCommand);
    Span span;
    span.step = step;
    span.ids.assign(ids.begin() + static_cast<std::ptrdiff_t>(begin),
                    ids.begin() + static_cast<std::ptrdiff_t>(end));
    span.begin = plan->commands.size();
    for (auto& command : build(std::span<const std::string>(span.ids))) {
      plan->commands.push_back(std::move(command));
    }
    span.end = plan->commands.size();
    plan->spans.push_back(std::move(span));
  }
}

// One span of one entry's dead-letter step.
void AddDeadLetterSpan(SettlePlan* plan, Step step, DeadLetterJob job,
                       std::vector<redis::Command> commands) {
  Span span;
  span.step = step;
  span.begin = plan->commands.size();
  for (auto& command : commands) plan->commands.push_back(std::move(command));
  span.end = plan->commands.size();
  span.ids.push_back(std::move(job.id));
  span.meta = std::move(job.meta);
  plan->spans.push_back(std::move(span));
}

// A span of one command that carries no id.
void AddSpan(SettlePlan* plan, Step step, redis::Command command) {
  Span span;
  span.step = step;
  span.begin = plan->commands.size();
  plan->commands.push_back(std::move(command));
  span.end = plan->commands.size();
  plan->spans.push_back(std::move(span));
}

// The first error in a span's replies, inside a transaction's EXEC reply too; "" for none.
std::string FirstError(std::span<const redis::Reply> replies) {
  Status status = redis::SubscriptionOps::ParseAck(replies);
  return status.ok() ? std::string() : status.message();
}

bool IsNoScriptReply(std::span<const redis::Reply> replies) {
  return replies.size() == 1 && redis::IsNoScript(replies.front().view());
}

// Puts the whole of `span` in `out` (not applied, for the reason `out` stands for).
void AddUnapplied(const Span& span, Unapplied* out, const std::string& error = {}) {
  switch (span.step) {
    case Step::kLoadScripts:
    case Step::kReplicaWait:
    case Step::kReplicaProbe:
      break;
    case Step::kKeepAlive:
      out->keepalive = true;
      out->keepalive_ids += span.ids.size();
      break;
    case Step::kAck:
      out->acks.insert(out->acks.end(), span.ids.begin(), span.ids.end());
      break;
    case Step::kGoneAck:
      out->gone_acks.insert(out->gone_acks.end(), span.ids.begin(), span.ids.end());
      break;
    case Step::kDeadLetter:
    case Step::kDeadLetterCheck:
    case Step::kDeadLetterAck:
    case Step::kDeadLetterWrite:
      out->dead_letters.push_back({span.ids.front(), span.meta, error});
      break;
    case Step::kRetryClaim:
      out->retry_claims.insert(out->retry_claims.end(), span.ids.begin(), span.ids.end());
      break;
    case Step::kUndoReads:
      out->undo_reads.insert(out->undo_reads.end(), span.ids.begin(), span.ids.end());
      break;
  }
}

// The answered steps, one function each (ApplyAnswered's cases). Each span's replies hold no
// NOSCRIPT.

void AnsweredAcks(const Span& span, std::span<const redis::Reply> replies, SettleResult* out) {
  const std::string error = FirstError(replies);
  if (!error.empty()) {
    out->ack_error = error;
    AddUnapplied(span, &out->definite);
    return;
  }
  auto& acked = span.step == Step::kAck ? out->acked : out->gone_acked;
  acked.insert(acked.end(), span.ids.begin(), span.ids.end());
}

// The one-step script, and the two-step check, write and acknowledgement (SPEC 8).
void AnsweredDeadLetter(const Span& span, const redis::ReplyView reply, SettleResult* out) {
  const std::string& id = span.ids.front();
  switch (span.step) {
    case Step::kDeadLetter: {
      auto parsed = redis::SubscriptionOps::ParseDeadLetter(reply);
      if (!parsed.ok()) {
        AddUnapplied(span, &out->definite, parsed.status().message());
      } else if (*parsed == redis::DeadLetterResult::kWritten) {
        out->dead_lettered.push_back({id, span.meta, {}});
      } else {
        out->dead_letter_lost.push_back(id);
      }
      return;
    }
    case Step::kDeadLetterCheck: {
      auto ours = redis::SubscriptionOps::ParseStillOurs(reply, id);
      if (!ours.ok()) {
        AddUnapplied(span, &out->definite, ours.status().message());
      } else if (*ours) {
        out->dead_letter_ours.push_back({id, span.meta, {}});
      } else {
        // A peer's now: nothing written, as the one-step script.
        out->dead_letter_lost.push_back(id);
      }
      return;
    }
    case Step::kDeadLetterWrite:
      if (reply.IsError()) {
        AddUnapplied(span, &out->definite, redis::ErrorOf(reply).message());
      } else {
        out->dead_letter_written.push_back({id, span.meta, {}});
      }
      return;
    case Step::kDeadLetterAck: {
      auto acked = redis::SubscriptionOps::ParseOwnedAck(reply);
      if (!acked.ok()) {
        AddUnapplied(span, &out->definite, acked.status().message());
      } else if (*acked) {
        out->dead_lettered.push_back({id, span.meta, {}});
      } else {
        out->dead_letter_written_lost.push_back(id);
      }
      return;
    }
    default:
      return;
  }
}

void AnsweredRetryClaim(const Span& span, const redis::ReplyView reply, SettleResult* out) {
  auto parsed = redis::SubscriptionOps::ParseRetryClaim(reply);
  if (!parsed.ok()) {
    // An error means "unknown", never "gone" (SPEC 3.2): every entry is kept.
    out->claim_error = parsed.status().message();
    AddUnapplied(span, &out->definite);
    return;
  }
  std::unordered_map<std::string_view, const StreamEntry*> claimed;
  for (const auto& entry : parsed->entries) claimed[entry.id] = &entry;
  std::unordered_set<std::string_view> lost(parsed->lost_ids.begin(), parsed->lost_ids.end());
  for (const auto& id : span.ids) {
    if (lost.contains(id)) {
      out->claim_lost.push_back(id);
      continue;
    }
    auto it = claimed.find(id);
    if (it != claimed.end() && !it->second->deleted) {
      out->claimed.push_back(id);
      out->claimed_attempts.push_back(it->second->attempts);
      continue;
    }
    // Ours, but its payload is gone (deleted or trimmed while it waited; Redis 6.2 answers nil
    // for it): acknowledged, never POSTed again.
    out->claimed_gone.push_back(id);
  }
}

void AnsweredKeepAlive(const Span& span, const redis::ReplyView reply, SettleResult* out) {
  auto parsed = redis::SubscriptionOps::ParseIds(reply);
  if (!parsed.ok()) {
    out->keepalive_error = parsed.status().message();
    AddUnapplied(span, &out->definite);
    return;
  }
  for (auto& id : *parsed) out->keepalive_lost.push_back(std::move(id));
}

void AnsweredUndo(const Span& span, const redis::ReplyView reply, SettleResult* out) {
  auto parsed = redis::SubscriptionOps::ParseCount(reply);
  if (!parsed.ok()) {
    out->undo_error = parsed.status().message();
    AddUnapplied(span, &out->definite);
    return;
  }
  out->undone += *parsed;
}

// One answered span whose replies hold no NOSCRIPT.
void ApplyAnswered(const Span& span, std::span<const redis::Reply> replies, SettleResult* out) {
  switch (span.step) {
    case Step::kLoadScripts:
      out->scripts_answered = true;
      out->scripts_error = FirstError(replies);
      return;
    case Step::kAck:
    case Step::kGoneAck:
      return AnsweredAcks(span, replies, out);
    case Step::kDeadLetter:
    case Step::kDeadLetterCheck:
    case Step::kDeadLetterWrite:
    case Step::kDeadLetterAck:
      return AnsweredDeadLetter(span, replies.front().view(), out);
    case Step::kReplicaWait: {
      auto acked = redis::ParseReplicasAcked(replies.front().view());
      if (acked.ok()) {
        out->replicas_acked = *acked;
      } else {
        out->wait_error = acked.status().message();
      }
      return;
    }
    case Step::kReplicaProbe:
      out->probe_answered = true;
      out->replicas = redis::ParseReplicaCount(replies.front().view());
      return;
    case Step::kRetryClaim:
      return AnsweredRetryClaim(span, replies.front().view(), out);
    case Step::kKeepAlive:
      return AnsweredKeepAlive(span, replies.front().view(), out);
    case Step::kUndoReads:
      return AnsweredUndo(span, replies.front().view(), out);
  }
}

}  // namespace

std::string_view Name(SettleClass c) {
  switch (c) {
    case SettleClass::kLostLease:
      return "lost_lease";
    case SettleClass::kDefinite:
      return "definite";
    case SettleClass::kAmbiguous:
      return "ambiguous";
  }
  return "definite";
}

std::string_view Name(SettlePlan::Step step) {
  switch (step) {
    case Step::kLoadScripts:
      return "load_scripts";
    case Step::kKeepAlive:
      return "keepalive";
    case Step::kAck:
    case Step::kGoneAck:
      return "ack";
    case Step::kDeadLetter:
    case Step::kDeadLetterCheck:
    case Step::kDeadLetterAck:
    case Step::kDeadLetterWrite:
      return "dead_letter";
    case Step::kReplicaWait:
      return "replica_wait";
    case Step::kReplicaProbe:
      return "replica_probe";
    case Step::kRetryClaim:
      return "retry_claim";
    case Step::kUndoReads:
      return "undo_reads";
  }
  return "ack";
}

SettlePlan SettleBatch(const redis::SubscriptionOps& ops, redis::AckMode mode,
                       const redis::DeadLetterTarget& dlq, SettleWork work) {
  SettlePlan plan;
  const bool acks = !work.acks.empty() || !work.gone_acks.empty();
  const bool uses_scripts = !work.keepalive.empty() || !work.dead_letters.empty() ||
                            !work.dead_letter_acks.empty() || !work.retry_claims.empty() ||
                            !work.undo_reads.empty() || (acks && ops.EveryStepIsAScript());
  if (work.load_scripts && uses_scripts) {
    Span span;
    span.step = Step::kLoadScripts;
    for (const auto* script : ops.Scripts()) plan.commands.push_back(script->Load());
    span.end = plan.commands.size();
    plan.spans.push_back(std::move(span));
  }
  AddChunked(&plan, Step::kKeepAlive, work.keepalive, [&](std::span<const std::string> ids) {
    return std::vector<redis::Command>{ops.KeepAlive(ids)};
  });
  AddChunked(&plan, Step::kAck, work.acks, [&](std::span<const std::string> ids) {
    return std::move(ops.Ack(ids, mode).commands);
  });
  AddChunked(&plan, Step::kGoneAck, work.gone_acks, [&](std::span<const std::string> ids) {
    return std::move(ops.Ack(ids, mode).commands);
  });
  for (auto& job : work.dead_letters) {
    if (job.entry == nullptr) continue;  // not held: nothing to write
    Span span;
    span.step = Step::kDeadLetter;
    span.begin = plan.commands.size();
    plan.commands.push_back(ops.DeadLetter(dlq, *job.entry, job.meta, mode));
    span.end = plan.commands.size();
    span.ids.push_back(std::move(job.id));
    span.meta = std::move(job.meta);
    plan.spans.push_back(std::move(span));
  }
  for (auto& job : work.dead_letter_checks) {
    if (job.entry == nullptr) continue;
    auto commands = ops.DeliveryCounts(std::span<const StreamEntry>(job.entry, 1));
    AddDeadLetterSpan(&plan, Step::kDeadLetterCheck, std::move(job), std::move(commands));
  }
  for (auto& job : work.dead_letter_acks) {
    if (job.entry == nullptr) continue;
    std::vector<redis::Command> commands;
    commands.push_back(ops.OwnedAck(job.id, mode));
    AddDeadLetterSpan(&plan, Step::kDeadLetterAck, std::move(job), std::move(commands));
  }
  AddChunked(&plan, Step::kRetryClaim, work.retry_claims, [&](std::span<const std::string> ids) {
    return std::vector<redis::Command>{ops.RetryClaim(ids)};
  });
  AddChunked(&plan, Step::kUndoReads, work.undo_reads, [&](std::span<const std::string> ids) {
    return std::vector<redis::Command>{ops.UndoReads(ids)};
  });
  return plan;
}

SettlePlan DeadLetterWriteBatch(const redis::SubscriptionOps& ops,
                                const redis::DeadLetterTarget& dlq, DeadLetterWriteWork work) {
  SettlePlan plan;
  for (auto& job : work.writes) {
    if (job.entry == nullptr) continue;
    std::vector<redis::Command> commands;
    commands.push_back(redis::DeadLetterAdd(dlq, ops.stream(), ops.group(), *job.entry, job.meta));
    AddDeadLetterSpan(&plan, Step::kDeadLetterWrite, std::move(job), std::move(commands));
  }
  if ((!plan.empty() || work.confirm) && work.wait_replicas > 0) {
    AddSpan(&plan, Step::kReplicaWait,
            redis::WaitForReplicas(work.wait_replicas, work.wait_timeout));
  }
  if (work.probe && !plan.empty()) AddSpan(&plan, Step::kReplicaProbe, redis::RoleProbe());
  return plan;
}

SettleResult ApplySettleReplies(const SettlePlan& plan, const redis::BatchResult& result) {
  SettleResult out;
  const std::span<const redis::Reply> replies(result.replies);
  for (const Span& span : plan.spans) {
    if (span.end > replies.size()) {
      // No whole answer: it may have been applied only if something was sent.
      if (result.written) {
        AddUnapplied(span, &out.ambiguous);
        if (out.failure.empty()) {
          out.failure = result.failure.ok() ? "the reply was cut short" : result.failure.message();
        }
      } else {
        AddUnapplied(span, &out.unsent);
      }
      continue;
    }
    auto own = replies.subspan(span.begin, span.end - span.begin);
    if (span.step != Step::kLoadScripts && IsNoScriptReply(own)) {
      out.noscript_error = std::string(own.front().view().Str());
      AddUnapplied(span, &out.noscript, out.noscript_error);
      continue;
    }
    ApplyAnswered(span, own, &out);
  }
  return out;
}

size_t SettleResult::Count(SettleClass c) const {
  switch (c) {
    case SettleClass::kLostLease:
      // The keepalive's lost ids count only for entries the ledger still held (settlement.cc).
      return dead_letter_lost.size() + dead_letter_written_lost.size() + claim_lost.size();
    case SettleClass::kDefinite:
      return definite.acks.size() + definite.gone_acks.size() + definite.dead_letters.size() +
             definite.retry_claims.size() + definite.keepalive_ids;
    case SettleClass::kAmbiguous:
      return ambiguous.acks.size() + ambiguous.gone_acks.size() + ambiguous.dead_letters.size() +
             ambiguous.retry_claims.size();
  }
  return 0;
}

}  // namespace streamcar::runtime
