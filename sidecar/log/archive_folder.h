#pragma once
// The archive folder of one stream (SPEC 10): on each retention beat it folds the entries the
// retention rule would trim into the archive, then trims only what was folded.
//
// One step, in this order:
//   (a) take or renew the lease `keys::ArchiveKeysOf(stream).lease` (a fencing token from INCR of
//       `.token` with every new lease);
//   (b) read the oldest entries up to the rule's trim point (MAXLEN: all but the newest max_len;
//       MINID: older than now - max_age; a manual trim's point: up to an id), `batch` at a time,
//       with XRANGE;
//   (c) ArchiveStore::Fold with the token: W advances in the archive's own transaction, which
//       refuses a token lower than one already used (a stale folder writes nothing);
//   (d) record W in Redis (`.watermark`), only ever raising it;
//   (e) XTRIM MINID just above the last folded id: never above W, never above the rule.
// A crash between any two of these loses nothing (nothing is trimmed before it is in the archive)
// and duplicates nothing (the fold is idempotent by id; the next step folds the same entries
// again and trims them). docs/archive.md has the argument in full.
//
// Thread: the caller's; the Session is the caller's too.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "sidecar/admin/metrics.h"
#include "sidecar/common/clock.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/common/text.h"
#include "sidecar/keys/archive_keys.h"
#include "sidecar/log/archive_store.h"
#include "sidecar/redis/session.h"

namespace streamcar::log {

struct FolderOptions {
  std::string stream;
  std::string holder;   // the lease holder's name (the consumer name)
  int batch = 1000;     // entries per XRANGE and per Fold
  int64_t max_len = 0;  // the retention rule: keep the newest max_len (0: off)
  Millis max_age{0};    // ... and/or what is younger than max_age (0: off)
  // ... and/or every entry at or below this id: a manual trim's point (`streamcar trim`), fixed
  // when it starts so that what producers append meanwhile is not due.
  std::optional<EntryId> due_through;
  Millis lease_ttl{30000};
  Millis step_budget{5000};  // a step stops after this long; `more` says the backlog remains
  // Called after every batch of a step (may be empty): the caller's watchdog beat, so that a
  // long catch-up of many streams in one pass does not look wedged.
  std::function<void()> on_batch;
};

// Where FoldBatch stops: the test seam that stands for a crash between two steps.
enum class FoldPhase { kFolded, kRecorded, kTrimmed };

struct BatchOutcome {
  int64_t read = 0;       // entries folded in this batch (0: nothing is due)
  int64_t inserted = 0;   // of them, new to the archive
  int64_t trimmed = 0;    // removed from Redis
  std::string watermark;  // W after the fold
  bool full = false;      // the batch was full: more may be due
};

struct StepOutcome {
  int64_t token = 0;  // 0: another folder holds the lease; nothing was done
  int64_t folded = 0;
  int64_t inserted = 0;
  int64_t trimmed = 0;
  bool more = false;  // the budget ran out with entries still due
};

class ArchiveFolder {
 public:
  // `store` is borrowed; `metrics` may be null.
  ArchiveFolder(FolderOptions options, ArchiveStore* store, admin::Metrics* metrics);

  // (a)-(e) until nothing is due, the budget is spent, or `stop` is requested. kFatal "fenced"
  // when another folder took over meanwhile (the lease is then given up); kIo/kTimeout when Redis
  // or the archive cannot be reached (nothing is trimmed that was not folded).
  StatusOr<StepOutcome> Step(redis::Session& session, const StopSignal* stop = nullptr);

  // (a): the token of the lease this folder holds now, or 0 when another holder has it.
  StatusOr<int64_t> TakeLease(redis::Session& session);
  // Gives the lease back when this folder still holds it (its holder and its token), so that
  // another folder (a manual trim, another replica) may take it at once instead of waiting for
  // its expiry. True when it was released.
  StatusOr<bool> ReleaseLease(redis::Session& session);
  // (b)-(e) for one batch under `token`, stopping after `stop_after`.
  StatusOr<BatchOutcome> FoldBatch(redis::Session& session, int64_t token,
                                   FoldPhase stop_after = FoldPhase::kTrimmed);

  const FolderOptions& options() const { return options_; }
  const keys::ArchiveKeys& keys() const { return keys_; }

 private:
  StatusOr<redis::Reply> RunScript(redis::Session& session, const redis::Command& call,
                                   const redis::Command& load);

  FolderOptions options_;
  keys::ArchiveKeys keys_;
  ArchiveStore* store_;
  admin::Metrics* metrics_;
  int64_t token_ = 0;  // the token of the lease held, 0: none
};

}  // namespace streamcar::log
