#pragma once
// An archive that opens on first use (SPEC 10, SPEC 1): a PostgreSQL server that is unreachable
// when the sidecar starts must not stop every subscription. Until the backend opens, every call
// answers kIo (the folders skip their steps, so an archived stream is not trimmed; the log API
// answers from Redis what it can) and a new attempt is made at most once per backoff step
// (1 s doubling to 60 s), each failure logged once.

#include <memory>
#include <mutex>
#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/log/archive_store.h"

namespace streamcar::log {

class LazyArchive : public ArchiveStore {
 public:
  // `first_error`: why an attempt made just before failed (the next waits a backoff step).
  explicit LazyArchive(std::string url, Status first_error = Status::Ok());

  StatusOr<FoldResult> Fold(const std::string& stream, const std::vector<StreamEntry>& entries,
                            int64_t fence_token) override;
  StatusOr<std::string> Watermark(const std::string& stream) override;
  StatusOr<ArchivePage> Read(const std::string& stream, const std::string& after,
                             const std::string& until, int count) override;

  // The backend once it is open; kIo (with the last error) while it cannot be, without a new
  // attempt before the backoff step ends.
  StatusOr<ArchiveStore*> Ensure();

 private:
  std::string url_;
  std::mutex mu_;
  std::unique_ptr<ArchiveStore> store_;  // guarded by mu_; never reset once set
  Status last_error_;
  SteadyTime next_attempt_{};
  Millis backoff_{0};
};

// Opens `url` once: the backend when it opens, a LazyArchive that keeps trying when it cannot be
// reached (kIo, kTimeout), the error for anything retrying cannot fix (kInvalid: a malformed URL
// or a scheme this build does not support; kFatal).
StatusOr<std::unique_ptr<ArchiveStore>> OpenArchiveOrRetry(const std::string& url);

}  // namespace streamcar::log
