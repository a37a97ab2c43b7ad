#pragma once
// An in-memory ArchiveStore for tests of the logic above the archive (the merge-read, follow):
// the same promises as the real backends (one snapshot per Read, W never backwards, fenced
// folds), plus hooks that let a test run a fold or a trim at the exact moment between the steps
// of a read. The backends themselves are tested by the conformance suite.

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "sidecar/log/archive_store.h"
#include "sidecar/log/entry_id.h"

namespace streamcar::testing {

using log::ArchivePage;
using log::ArchiveStore;
using log::FormatId;
using log::kMaxId;
using log::kMinId;
using log::ParseId;

class FakeArchive : public ArchiveStore {
 public:
  // Called at the start of Watermark() and Read(), outside the store's lock (a hook may Fold).
  std::function<void()> before_watermark;
  std::function<void()> before_read;

  StatusOr<log::FoldResult> Fold(const std::string& stream, const std::vector<StreamEntry>& entries,
                                 int64_t fence_token) override {
    std::lock_guard lock(mutex_);
    auto& s = streams_[stream];
    if (fence_token < s.token) return Status(StatusCode::kFatal, "fenced");
    s.token = fence_token;
    log::FoldResult result;
    for (const auto& entry : entries) {
      auto id = *ParseId(entry.id);
      // An id already archived is kept as it was.
      if (s.entries.emplace(id, entry).second) ++result.inserted;
      if (id > s.watermark) s.watermark = id;
    }
    ++folds_;
    result.watermark = FormatId(s.watermark);
    return result;
  }

  StatusOr<std::string> Watermark(const std::string& stream) override {
    if (before_watermark) before_watermark();
    std::lock_guard lock(mutex_);
    ++watermark_reads_;
    return FormatId(streams_[stream].watermark);
  }

  StatusOr<ArchivePage> Read(const std::string& stream, const std::string& after,
                             const std::string& until, int count) override {
    if (before_read) before_read();
    std::lock_guard lock(mutex_);
    ++reads_;
    auto& s = streams_[stream];
    ArchivePage page;
    page.watermark = FormatId(s.watermark);
    const EntryId low = *ParseId(after);
    const EntryId high = until.empty() ? kMaxId : *ParseId(until);
    for (auto it = s.entries.upper_bound(low);
         it != s.entries.end() && it->first < high && static_cast<int>(page.entries.size()) < count;
         ++it) {
      page.entries.push_back(it->second);
    }
    size_t bytes = 0;
    for (const auto& entry : page.entries) {
      for (const auto& [name, value] : entry.fields) bytes += name.size() + value.size();
    }
    largest_read_bytes_ = std::max(largest_read_bytes_, bytes);
    return page;
  }

  // W without running the hooks (for the test's own folder).
  std::string CurrentWatermark(const std::string& stream) {
    std::lock_guard lock(mutex_);
    return FormatId(streams_[stream].watermark);
  }

  int reads() {
    std::lock_guard lock(mutex_);
    return reads_;
  }

  // The most field bytes one Read returned.
  size_t largest_read_bytes() {
    std::lock_guard lock(mutex_);
    return largest_read_bytes_;
  }

 private:
  struct Stream {
    EntryId watermark = kMinId;
    int64_t token = 0;
    std::map<EntryId, StreamEntry> entries;
  };
  std::mutex mutex_;
  std::map<std::string, Stream> streams_;
  int folds_ = 0;
  int watermark_reads_ = 0;
  int reads_ = 0;
  size_t largest_read_bytes_ = 0;
};

}  // namespace streamcar::testing
