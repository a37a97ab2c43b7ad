#include "sidecar/log/archive_folder.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <algorithm>

#include "sidecar/common/log.h"
#include "sidecar/common/text.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/redis/script.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::log {
namespace {

// KEYS: lease, token. ARGV: holder, ttl ms, the token this holder has ("0": none).
// Renews the lease when this holder has it and keeps its token when nobody took a newer one;
// takes a free lease with a new token; returns 0 when another holder has it. A holder that
// restarted (same name, no token) gets a new token at once: its old self is fenced by it.
const redis::Script kLeaseScript(R"lua(
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if holder and ARGV[3] ~= '0' and redis.call('GET', KEYS[2]) == ARGV[3] then
  return tonumber(ARGV[3])
end
return redis.call('INCR', KEYS[2])
)lua");

// KEYS: lease, token. ARGV: holder, the token this holder has. Deletes the lease only when this
// holder still has it under this token: a lease that expired and was taken since is not touched.
const redis::Script kReleaseScript(R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
)lua");

// KEYS: watermark. ARGV: W. Sets it only when it is above the recorded one, comparing ids as
// decimal strings (Lua numbers are doubles: 64-bit ids would lose digits).
const redis::Script kRecordWatermarkScript(R"lua(
local function less(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if not am then return true end
  if #am ~= #bm then return #am < #bm end
  if am ~= bm then return am < bm end
  if #as ~= #bs then return #as < #bs end
  return as < bs
end
local current = redis.call('GET', KEYS[1])
if not current or less(current, ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
)lua");

}  // namespace

ArchiveFolder::ArchiveFolder(FolderOptions options, ArchiveStore* store, admin::Metrics* metrics)
    : options_(std::move(options)),
      keys_(keys::ArchiveKeysOf(options_.stream)),
      store_(store),
      metrics_(metrics) {
  options_.batch = std::max(options_.batch, 1);
}

StatusOr<redis::Reply> ArchiveFolder::RunScript(redis::Session& session, const redis::Command& call,
                                                const redis::Command& load) {
  auto reply = session.Run(call);
  if (reply.ok() || !reply.status().IsServerError("NOSCRIPT")) return reply;
  // The server restarted or its scripts were flushed: load, then once more.
  if (auto loaded = session.Run(load); !loaded.ok()) return loaded.status();
  return session.Run(call);
}

StatusOr<int64_t> ArchiveFolder::TakeLease(redis::Session& session) {
  auto call = kLeaseScript.Call({keys_.lease, keys_.token})
                  .Arg(options_.holder)
                  .Arg(static_cast<int64_t>(options_.lease_ttl.count()))
                  .Arg(token_);
  auto reply = RunScript(session, call, kLeaseScript.Load());
  if (!reply.ok()) return reply.status();
  token_ = reply->view().Integer();
  return token_;
}

StatusOr<bool> ArchiveFolder::ReleaseLease(redis::Session& session) {
  if (token_ == 0) return false;
  auto call = kReleaseScript.Call({keys_.lease, keys_.token}).Arg(options_.holder).Arg(token_);
  auto reply = RunScript(session, call, kReleaseScript.Load());
  if (!reply.ok()) return reply.status();
  token_ = 0;
  return reply->view().Integer() == 1;
}

StatusOr<BatchOutcome> ArchiveFolder::FoldBatch(redis::Session& session, int64_t token,
                                                FoldPhase stop_after) {
  const std::string& stream = options_.stream;
  BatchOutcome outcome;
  // (b) The trim point: the oldest `due_by_len` entries (all but the newest max_len), every
  // entry older than the age cut, and every entry up to `due_through`. Each is a prefix of the
  // stream; their union is too.
  int64_t due_by_len = 0;
  if (options_.max_len > 0) {
    auto len = session.Run(redis::Command("XLEN").Arg(stream));
    if (!len.ok()) return len.status();
    due_by_len = std::max<int64_t>(0, len->view().Integer() - options_.max_len);
  }
  std::optional<EntryId> age_cut;
  if (options_.max_age.count() > 0) {
    const int64_t cut_ms = SystemClock::Instance().WallMillis() - options_.max_age.count();
    if (cut_ms > 0) age_cut = EntryId{static_cast<uint64_t>(cut_ms), 0};
  }
  const std::optional<EntryId>& through = options_.due_through;
  if (due_by_len == 0 && !age_cut && !through) return outcome;
  auto range = session.Run(
      redis::Command("XRANGE").Arg(stream).Arg("-").Arg("+").Arg("COUNT").Arg(options_.batch));
  if (!range.ok()) return range.status();
  std::vector<StreamEntry> entries = redis::SubscriptionOps::ParseEntries(range->view());
  size_t due = 0;
  for (; due < entries.size(); ++due) {
    const bool by_len = static_cast<int64_t>(due) < due_by_len;
    const auto id = ParseEntryId(entries[due].id);
    if (!id) return Status(StatusCode::kProtocol, "XRANGE answered a bad id: " + entries[due].id);
    const bool by_age = age_cut && *id < *age_cut;
    const bool by_point = through && *id <= *through;
    if (!by_len && !by_age && !by_point) break;
  }
  outcome.full = due == static_cast<size_t>(options_.batch);
  entries.resize(due);
  if (entries.empty()) return outcome;
  const std::string last_id = entries.back().id;

  // (c) Into the archive, fenced by the token, W advanced in the same transaction.
  auto folded = store_->Fold(stream, entries, token);
  if (!folded.ok()) {
    if (folded.status().code() == StatusCode::kFatal) token_ = 0;  // fenced: the lease is gone
    return folded.status();
  }
  outcome.read = static_cast<int64_t>(entries.size());
  outcome.inserted = folded->inserted;
  outcome.watermark = folded->watermark;
  if (metrics_ != nullptr) {
    metrics_->ArchiveFolded(stream).Increment(static_cast<double>(folded->inserted));
    if (auto w = ParseEntryId(folded->watermark)) {
      metrics_->ArchiveWatermark(stream).Set(static_cast<double>(w->ms) / 1000.0);
    }
  }
  if (stop_after == FoldPhase::kFolded) return outcome;

  // (d) W in Redis, never lowered (a slower folder that committed earlier may write late).
  auto recorded =
      RunScript(session, kRecordWatermarkScript.Call({keys_.watermark}).Arg(folded->watermark),
                kRecordWatermarkScript.Load());
  if (!recorded.ok()) return recorded.status();
  if (stop_after == FoldPhase::kRecorded) return outcome;

  // (e) Trim exactly what was folded: everything up to and including the last folded id. That
  // id is at most W (it was folded) and at most the rule's trim point (it was due).
  const auto last = ParseEntryId(last_id);
  const auto min_id = Successor(*last);
  const std::string min_id_text = min_id ? min_id->ToString() : last->ToString();
  auto trimmed = session.Run(redis::Command("XTRIM").Arg(stream).Arg("MINID").Arg(min_id_text));
  if (!trimmed.ok()) return trimmed.status();
  outcome.trimmed = trimmed->view().Integer();
  if (!min_id) {
    // The largest possible id cannot be trimmed by MINID; XDEL removes it (it is folded).
    auto deleted = session.Run(redis::Command("XDEL").Arg(stream).Arg(last_id));
    if (!deleted.ok()) return deleted.status();
    outcome.trimmed += deleted->view().Integer();
  }
  if (metrics_ != nullptr)
    metrics_->Trimmed(stream).Increment(static_cast<double>(outcome.trimmed));
  return outcome;
}

StatusOr<StepOutcome> ArchiveFolder::Step(redis::Session& session, const StopSignal* stop) {
  StepOutcome outcome;
  // W from the archive itself on every step, whoever folds: the gauge is right from the first
  // beat on every replica. An archive that cannot be reached skips the step (nothing trimmed).
  auto watermark = store_->Watermark(options_.stream);
  if (!watermark.ok()) return watermark.status();
  if (metrics_ != nullptr) {
    if (auto w = ParseEntryId(*watermark); w && w->ms > 0) {
      metrics_->ArchiveWatermark(options_.stream).Set(static_cast<double>(w->ms) / 1000.0);
    }
  }
  auto token = TakeLease(session);
  if (!token.ok()) return token.status();
  outcome.token = *token;
  if (*token == 0) return outcome;
  const auto started = SteadyClock::now();
  while (stop == nullptr || !stop->requested()) {
    auto batch = FoldBatch(session, *token);
    if (!batch.ok()) {
      if (batch.status().code() == StatusCode::kFatal) {
        LogWarn("archive folder fenced: another folder took this stream over",
                {{"stream", options_.stream}, {"error", batch.status().message()}});
      }
      return batch.status();
    }
    outcome.folded += batch->read;
    outcome.inserted += batch->inserted;
    outcome.trimmed += batch->trimmed;
    if (options_.on_batch) options_.on_batch();
    if (!batch->full) break;
    if (SteadyClock::now() - started >= options_.step_budget) {
      outcome.more = true;
      break;
    }
    // A long catch-up keeps its lease alive; a lease lost meanwhile ends the step (the archive
    // would refuse the old token anyway).
    auto renewed = TakeLease(session);
    if (!renewed.ok()) return renewed.status();
    if (*renewed != *token) break;
  }
  return outcome;
}

}  // namespace streamcar::log
