#pragma once
// The retention beat (SPEC 4.4): for every subscription with `retention` set, and every dead-letter
// stream with `dead_letter.max_len`, an XTRIM on its own interval, whether or not anything is
// consumed (a stream nobody drains is trimmed too). One thread and one Redis connection for all of
// them. Trimming is idempotent, so every replica may run it.
//
// A stream of the log API (`streams:`) with `archive: true` is never trimmed without folding: its
// beat step is an ArchiveFolder step (sidecar/log/archive_folder.h) that writes the entries due
// into the archive first and trims only those. The folder's lease is held for the step and given
// back once nothing more is due, so `streamcar trim` (sidecar/log/manual_trim.h) folds between
// two beats under the same lease, never at the same time as a beat.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/common/clock.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/config/config.h"
#include "sidecar/log/archive_folder.h"
#include "sidecar/log/archive_store.h"
#include "sidecar/redis/session.h"

namespace streamcar::log {

// One stream to trim and how.
struct TrimRule {
  std::string stream;
  int64_t max_len = 0;  // XTRIM MAXLEN ~ max_len (0: off)
  Millis max_age{0};    // XTRIM MINID ~ now-max_age (0: off)
  Millis interval{60000};
  bool archive = false;  // fold into the archive before trimming (SPEC 10)
};

// The rules a configuration asks for: each subscription's `retention`, each dead-letter stream's
// `max_len` (on the subscription's retention interval), and each log API stream's `retention`.
// An archived stream gets exactly one rule, whoever asked for its retention: the union of what
// they keep trimmed (the smallest max_len and max_age set), on the shortest of their intervals
// and `archive.interval`, so that it has one folder.
std::vector<TrimRule> TrimRulesOf(const config::Config& config);

// Where archived rules fold: the store is borrowed (null: an archived rule never trims, and
// says so), the holder names this replica in the folder's lease.
struct ArchiveDeps {
  ArchiveStore* store = nullptr;
  std::string holder;  // the consumer name
  int batch = 1000;
};

class RetentionBeat {
 public:
  // The most entries one XTRIM call may remove (its LIMIT): bounds the time Redis spends in it.
  static constexpr int64_t kLimitPerCall = 10000;
  // A beat repeats a trim that hit the limit at most this many times, then waits for the next.
  static constexpr int kCallsPerBeat = 10;

  RetentionBeat(std::vector<TrimRule> rules, std::unique_ptr<redis::Session> session,
                admin::Metrics* metrics, admin::Watchdog::Loop* loop, ArchiveDeps archive = {});
  ~RetentionBeat();
  void Start();
  void StopAndJoin();

 private:
  void Run();
  // Trims one rule; returns false when Redis could not be reached. Sets *more when an archived
  // stream has more due than one step folded (the next step follows at once).
  bool Trim(size_t index, bool* more);
  bool Fold(size_t index, bool* more);

  std::vector<TrimRule> rules_;
  ArchiveDeps archive_;
  std::vector<std::unique_ptr<ArchiveFolder>> folders_;  // by rule; null: not archived
  struct FoldError {
    std::string message;
    SteadyTime logged{};
  };
  std::vector<FoldError> fold_errors_;  // by rule: the last fold failure logged
  std::unique_ptr<redis::Session> session_;
  admin::Metrics* metrics_;
  admin::Watchdog::Loop* loop_;
  StopSignal stop_;
  std::thread thread_;
};

}  // namespace streamcar::log
