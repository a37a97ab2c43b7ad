#include "sidecar/log/manual_trim.h"

#include <thread>

#include "sidecar/keys/archive_keys.h"
#include "sidecar/log/archive_folder.h"
#include "sidecar/log/entry_id.h"

namespace streamcar::log {
namespace {

std::string Quoted(const std::string& stream) { return "\"" + PrintableOneLine(stream) + "\""; }

// Ok for a stream or a missing key; kFatal naming the type for any other key, before anything
// is read or written (the lease included).
Status CheckIsStream(redis::Session& session, const std::string& stream) {
  auto type = session.Run(redis::Command("TYPE").Arg(stream));
  if (!type.ok()) return type.status();
  const std::string_view name = type->view().Str();
  if (name == "stream" || name == "none") return Status::Ok();
  return Status(StatusCode::kFatal, "WRONGTYPE the Redis key " + Quoted(stream) + " holds a " +
                                        PrintableOneLine(name) + ", not a stream");
}

StatusOr<int64_t> LengthOf(redis::Session& session, const std::string& stream) {
  auto reply = session.Run(redis::Command("XLEN").Arg(stream));
  if (!reply.ok()) return reply.status();
  return reply->view().Integer();
}

// A stream without an archive: one exact XTRIM.
StatusOr<ManualTrimReport> TrimPlain(redis::Session& session, const ManualTrimOptions& options) {
  const TrimPoint& point = options.point;
  redis::Command xtrim("XTRIM");
  xtrim.Arg(options.stream);
  if (point.kind == TrimPoint::Kind::kMaxLen) {
    xtrim.Arg("MAXLEN").Arg(point.max_len);
  } else {
    auto cut = MinIdOf(session, options.stream, point);
    if (!cut.ok()) return cut.status();
    xtrim.Arg("MINID").Arg(FormatId(*cut));
  }
  auto trimmed = session.Run(xtrim);
  if (!trimmed.ok()) return trimmed.status();
  ManualTrimReport report;
  report.trimmed = trimmed->view().Integer();
  auto left = LengthOf(session, options.stream);
  if (!left.ok()) return left.status();
  report.left = *left;
  return report;
}

// What a trim would do, from reads alone.
StatusOr<ManualTrimReport> DryRun(redis::Session& session, const ManualTrimOptions& options) {
  auto span = DueSpanOf(session, options.stream, options.point, true);
  if (!span.ok()) return span.status();
  ManualTrimReport report;
  report.trimmed = span->count;
  report.left = span->length - span->count;
  if (options.archive == nullptr) return report;
  report.archived = true;
  auto watermark = options.archive->Watermark(options.stream);
  if (!watermark.ok()) return watermark.status();
  report.folded = span->count;
  report.watermark = span->last ? MaxId(*watermark, FormatId(*span->last)) : *watermark;
  return report;
}

// The lease's holder and time to live, for the wait message ("" and 0 once it is free).
std::pair<std::string, Millis> LeaseHolder(redis::Session& session, const std::string& stream) {
  const keys::ArchiveKeys keys = keys::ArchiveKeysOf(stream);
  auto holder = session.Run(redis::Command("GET").Arg(keys.lease));
  auto ttl = session.Run(redis::Command("PTTL").Arg(keys.lease));
  if (!holder.ok() || !ttl.ok()) return {"", Millis(0)};
  return {std::string(holder->view().Str()), Millis(std::max<int64_t>(0, ttl->view().Integer()))};
}

// The lease's token once this trim holds it, polling while another folder does (a beat's step
// in progress) for at most lease_wait.
StatusOr<int64_t> WaitForLease(redis::Session& session, ArchiveFolder& folder,
                               const ManualTrimOptions& options) {
  const auto deadline = SteadyClock::now() + options.lease_wait;
  bool told = false;
  while (true) {
    auto token = folder.TakeLease(session);
    if (!token.ok() || *token > 0) return token;
    const bool gave_up = SteadyClock::now() >= deadline;
    if (gave_up || (!told && options.on_wait)) {
      auto [holder, ttl] = LeaseHolder(session, options.stream);
      if (gave_up) {
        return Status(StatusCode::kTimeout,
                      "the archive folder of " + Quoted(options.stream) + " is held by \"" +
                          PrintableOneLine(holder) + "\" (lease expires in " +
                          std::to_string(ttl.count()) +
                          " ms unless renewed); nothing was folded or trimmed, try again");
      }
      options.on_wait(holder, ttl);
    }
    told = true;
    std::this_thread::sleep_for(options.lease_poll);
  }
}

// The ArchiveFolder's batches up to `through`, the lease renewed before each.
Status FoldThrough(redis::Session& session, ArchiveFolder& folder, int64_t token,
                   ManualTrimReport* report) {
  while (true) {
    auto batch = folder.FoldBatch(session, token);
    if (!batch.ok()) return batch.status();
    report->folded += batch->read;
    report->inserted += batch->inserted;
    report->trimmed += batch->trimmed;
    if (!batch->full) return Status::Ok();
    auto renewed = folder.TakeLease(session);
    if (!renewed.ok()) return renewed.status();
    if (*renewed == 0) {
      return Status(StatusCode::kFatal,
                    "another folder took the archive lease of " + Quoted(folder.options().stream) +
                        " over while this trim held it (it expired); what was folded is trimmed");
    }
    token = *renewed;  // a lease that expired untaken comes back with a new token
  }
}

// An archived stream: fold everything up to the trim point, trimming each batch once folded.
StatusOr<ManualTrimReport> FoldThenTrim(redis::Session& session, const ManualTrimOptions& options) {
  ManualTrimReport report;
  report.archived = true;
  auto span = DueSpanOf(session, options.stream, options.point, false);
  if (!span.ok()) return span.status();
  if (span->last) {
    FolderOptions folder_options;
    folder_options.stream = options.stream;
    folder_options.holder = options.holder;
    folder_options.batch = options.batch;
    folder_options.due_through = span->last;
    folder_options.lease_ttl = options.lease_ttl;
    ArchiveFolder folder(folder_options, options.archive, nullptr);
    auto token = WaitForLease(session, folder, options);
    if (!token.ok()) return token.status();
    const Status folded = FoldThrough(session, folder, *token, &report);
    // Given back whatever happened; one that fails expires after lease_ttl.
    (void)folder.ReleaseLease(session);
    if (!folded.ok()) return folded;
  }
  auto watermark = options.archive->Watermark(options.stream);
  if (!watermark.ok()) return watermark.status();
  report.watermark = *watermark;
  auto left = LengthOf(session, options.stream);
  if (!left.ok()) return left.status();
  report.left = *left;
  return report;
}

}  // namespace

StatusOr<ManualTrimReport> TrimNow(redis::Session& session, const ManualTrimOptions& options) {
  if (Status is_stream = CheckIsStream(session, options.stream); !is_stream.ok()) {
    return is_stream;
  }
  if (options.dry_run) return DryRun(session, options);
  if (options.archive == nullptr) return TrimPlain(session, options);
  return FoldThenTrim(session, options);
}

}  // namespace streamcar::log
