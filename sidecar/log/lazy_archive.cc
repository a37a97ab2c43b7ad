#include "sidecar/log/lazy_archive.h"

#include <algorithm>

#include "sidecar/common/log.h"

namespace streamcar::log {
namespace {

constexpr Millis kFirstBackoff{1000};
constexpr Millis kMaxBackoff{60000};

bool Retryable(const Status& status) {
  return status.code() == StatusCode::kIo || status.code() == StatusCode::kTimeout;
}

}  // namespace

LazyArchive::LazyArchive(std::string url, Status first_error)
    : url_(std::move(url)), last_error_(std::move(first_error)) {
  if (!last_error_.ok()) {
    backoff_ = kFirstBackoff;
    next_attempt_ = SteadyClock::now() + backoff_;
  }
}

StatusOr<ArchiveStore*> LazyArchive::Ensure() {
  std::lock_guard lock(mu_);
  if (store_) return store_.get();
  const auto now = SteadyClock::now();
  if (now < next_attempt_) {
    return Status(StatusCode::kIo, "archive not open: " + last_error_.message());
  }
  auto opened = OpenArchive(url_);
  if (opened.ok()) {
    store_ = std::move(*opened);
    if (backoff_.count() > 0) LogInfo("archive opened");
    return store_.get();
  }
  backoff_ = backoff_.count() == 0 ? kFirstBackoff : std::min(backoff_ * 2, kMaxBackoff);
  next_attempt_ = SteadyClock::now() + backoff_;
  last_error_ = opened.status();
  LogError(
      "archive cannot be opened; archived streams are not folded nor trimmed until it can",
      {{"error", last_error_.message()}, {"retry_in_ms", static_cast<int64_t>(backoff_.count())}});
  // A malformed URL is refused before a LazyArchive is made; anything else is worth retrying.
  return Status(StatusCode::kIo, "archive not open: " + last_error_.message());
}

StatusOr<FoldResult> LazyArchive::Fold(const std::string& stream,
                                       const std::vector<StreamEntry>& entries,
                                       int64_t fence_token) {
  auto store = Ensure();
  if (!store.ok()) return store.status();
  return (*store)->Fold(stream, entries, fence_token);
}

StatusOr<std::string> LazyArchive::Watermark(const std::string& stream) {
  auto store = Ensure();
  if (!store.ok()) return store.status();
  return (*store)->Watermark(stream);
}

StatusOr<ArchivePage> LazyArchive::Read(const std::string& stream, const std::string& after,
                                        const std::string& until, int count) {
  auto store = Ensure();
  if (!store.ok()) return store.status();
  return (*store)->Read(stream, after, until, count);
}

StatusOr<std::unique_ptr<ArchiveStore>> OpenArchiveOrRetry(const std::string& url) {
  auto opened = OpenArchive(url);
  if (opened.ok() || !Retryable(opened.status())) return opened;
  LogError("archive cannot be opened yet; retrying in the background",
           {{"error", opened.status().message()}});
  auto lazy = std::make_unique<LazyArchive>(url, opened.status());
  return std::unique_ptr<ArchiveStore>(std::move(lazy));
}

}  // namespace streamcar::log
