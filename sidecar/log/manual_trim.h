#pragma once
// `streamcar trim` (SPEC 1 and 10): trims one stream now, to a length, an age or an id.
//
// A stream with `archive: true` is folded first, exactly as the retention beat folds: the
// ArchiveFolder's batches (sidecar/log/archive_folder.h: read, fold with the fencing token, record
// W, trim exactly what was folded) under the stream's one lease. The beat gives that lease back
// after each step, so a trim waits at most for a step in progress, and a beat that comes while the
// trim holds it skips its turn: the two never fold at the same time. The trim point is fixed when
// the trim starts (the newest due entry's id), so entries appended meanwhile are not due and the
// fold ends. Nothing is trimmed above what was folded.
//
// Any other stream gets one exact XTRIM (MAXLEN n, or MINID id; for an age, MINID of Redis TIME
// on the stream's node minus the age). A dry run reads and counts, and writes nothing: no lease,
// no fold, no trim.

#include <cstdint>
#include <functional>
#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/log/archive_store.h"
#include "sidecar/log/trim_plan.h"
#include "sidecar/redis/session.h"

namespace streamcar::log {

struct ManualTrimOptions {
  std::string stream;
  TrimPoint point;
  bool dry_run = false;
  // Set: the stream is archived, and is folded into this store before it is trimmed.
  ArchiveStore* archive = nullptr;
  std::string holder;        // the name the lease is held under while this trim folds
  int batch = 1000;          // entries per fold (archive.batch)
  Millis lease_ttl{15000};   // renewed before every batch; a trim that dies frees it after this
  Millis lease_wait{60000};  // the longest wait for another folder to give the lease back
  Millis lease_poll{50};
  // Told once when another folder holds the lease: its holder and the lease's time to live.
  std::function<void(const std::string& holder, Millis ttl)> on_wait;
};

struct ManualTrimReport {
  bool archived = false;
  int64_t folded = 0;     // entries written to the archive (a dry run: that would be)
  int64_t inserted = 0;   // of them, new to the archive (a dry run: not counted, 0)
  std::string watermark;  // archived: W after the fold (a dry run: what it would be)
  int64_t trimmed = 0;    // entries removed from Redis (a dry run: that would be)
  int64_t left = 0;       // entries in Redis after (a dry run: that would be)
};

// Trims `options.stream` as described above. Errors: kFatal when the key holds another type
// (WRONGTYPE), when the archive refuses the fold's token (another folder took over) or when the
// lease is lost while folding; kTimeout when another folder held the lease for all of
// `lease_wait`; kIo and kServerError as Redis and the archive answer. Nothing is trimmed that is
// not in the archive, whatever fails.
StatusOr<ManualTrimReport> TrimNow(redis::Session& session, const ManualTrimOptions& options);

}  // namespace streamcar::log
