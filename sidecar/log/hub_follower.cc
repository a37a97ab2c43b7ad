// A follower of the follow hub (follow_hub.cc): it catches up through the hub's catch-up reads
// until a page reaches the stream's top, then takes its entries from the shared read's buffer,
// and catches up again whenever it falls below the buffer's floor.

#include <algorithm>

#include "sidecar/log/follow_hub_impl.h"

namespace streamcar::log {
namespace {

class HubFollower final : public Follower {
 public:
  HubFollower(std::shared_ptr<FollowHub::Impl> hub, std::string stream, const std::string& after,
              ArchiveStore* archive)
      : hub_(std::move(hub)), stream_(std::move(stream)), archive_(archive) {
    hub_->AddFollower(stream_);
    if (after == "$") {
      Status error;
      if (auto now = hub_->ResolveNow(stream_, &error))
        position_ = *now;
      else
        resolve_now_ = true;  // Redis is unreachable: "now" is decided by the first Next()
    } else {
      position_ = ParseId(after).value_or(kMinId);
    }
  }
  ~HubFollower() override { hub_->RemoveFollower(stream_); }

  Status NextWithin(std::vector<StreamEntry>* out, Millis wait, size_t max_bytes) override {
    out->clear();
    const SteadyTime deadline = SteadyClock::now() + wait;
    if (resolve_now_) {
      Status error;
      auto now = hub_->ResolveNow(stream_, &error);
      if (!now) return error;
      position_ = *now;
      resolve_now_ = false;
    }
    while (true) {
      if (!joined_) {
        Status status = CatchUp(out, max_bytes);
        if (status.code() == StatusCode::kIo || status.code() == StatusCode::kTimeout) {
          // Redis is unreachable: report it after `wait`, so a caller that loops on Next does
          // not spin; the position is kept and the next call resumes from it.
          hub_->PauseUntil(deadline);
          return status;
        }
        if (!status.ok() || !out->empty()) return status;
        if (!joined_) continue;  // the floor moved on meanwhile: another page
      }
      std::unique_lock lock(hub_->mutex());
      if (hub_->stopping()) return Status(StatusCode::kCancelled, "the follow hub stopped");
      auto it = hub_->feeds().find(stream_);
      if (it == hub_->feeds().end()) {
        joined_ = false;  // cannot happen while we follow; recover by catching up
        continue;
      }
      Feed& feed = it->second;
      if (!feed.error.ok()) return feed.error;
      if (position_ < feed.floor) {
        joined_ = false;  // fell behind more than the buffer holds: catch up from the log
        continue;
      }
      feed.TakeAfter(&position_, out, max_bytes);
      if (!out->empty()) return Status::Ok();
      const EntryId seen = feed.last;
      const EntryId floor = feed.floor;
      const bool woke = hub_->changed().wait_until(lock, deadline, [&] {
        if (hub_->stopping()) return true;
        auto again = hub_->feeds().find(stream_);
        return again == hub_->feeds().end() || again->second.last != seen ||
               again->second.floor != floor || !again->second.error.ok();
      });
      if (!woke) {
        // Nothing new in time: not an error, unless the shared read cannot reach Redis.
        return hub_->ReadErrorLocked(stream_);
      }
    }
  }

 private:
  // One page from the log, of about `max_bytes`; joins (or starts) the shared read once a page
  // reaches the top.
  Status CatchUp(std::vector<StreamEntry>* out, size_t max_bytes) {
    std::optional<EntryId> floor_before;
    {
      std::lock_guard lock(hub_->mutex());
      if (hub_->stopping()) return Status(StatusCode::kCancelled, "the follow hub stopped");
      auto it = hub_->feeds().find(stream_);
      if (it != hub_->feeds().end()) {
        if (!it->second.error.ok()) return it->second.error;
        if (position_ >= it->second.floor) {
          joined_ = true;
          return Status::Ok();
        }
        floor_before = it->second.floor;
      }
    }
    EntryId top;
    auto page = hub_->CatchUpPage(stream_, position_, archive_, PageCount(max_bytes), &top);
    if (!page.ok()) return page.status();
    // Entries past `max_bytes` are left for the next call (the page's size is a guess from the
    // entries seen so far), which reads them again: the position is the last one kept.
    size_t kept_bytes = 0;
    for (auto& entry : page->entries) {
      if (!out->empty() && kept_bytes >= max_bytes) break;
      const size_t bytes = EntryBytes(entry);
      kept_bytes += bytes;
      seen_bytes_ += bytes;
      ++seen_entries_;
      out->push_back(std::move(entry));
    }
    const bool left_some = out->size() < page->entries.size();
    if (!out->empty()) position_ = *ParseId(out->back().id);
    if (page->next || left_some) return Status::Ok();  // more to catch up on
    // The page reached the stream's top: see the comment at the top of follow_hub.cc. The jump is
    // safe only to a floor the page has read up to.
    if (floor_before && position_ < *floor_before && *floor_before <= top) {
      position_ = *floor_before;
    }
    std::lock_guard lock(hub_->mutex());
    auto it = hub_->feeds().find(stream_);
    if (it == hub_->feeds().end()) {
      // A position above the top (a resume point from the future) must not start the shared
      // read there: it would wait for ids above it and starve every later follower. The
      // follower's own position still skips entries at or below it.
      hub_->StartFeedLocked(stream_, std::min(position_, top));
      joined_ = true;
    } else if (position_ >= it->second.floor) {
      joined_ = true;
    }
    return Status::Ok();
  }

  // How many entries a catch-up page should ask for to hold about `max_bytes`, from the mean size
  // of the entries read so far (kGuessedEntryBytes before any has been read).
  int PageCount(size_t max_bytes) const {
    constexpr size_t kGuessedEntryBytes = 4096;
    const size_t mean =
        seen_entries_ == 0 ? kGuessedEntryBytes : std::max<size_t>(seen_bytes_ / seen_entries_, 1);
    return static_cast<int>(std::clamp<size_t>(max_bytes / mean + 1, 1, kFollowBatch));
  }

  std::shared_ptr<FollowHub::Impl> hub_;
  std::string stream_;
  ArchiveStore* archive_;
  EntryId position_ = kMinId;
  bool resolve_now_ = false;
  bool joined_ = false;
  uint64_t seen_bytes_ = 0;  // of the catch-up entries read, for PageCount
  uint64_t seen_entries_ = 0;
};

}  // namespace

std::unique_ptr<Follower> MakeHubFollower(std::shared_ptr<FollowHub::Impl> hub, std::string stream,
                                          const std::string& after, ArchiveStore* archive) {
  return std::make_unique<HubFollower>(std::move(hub), std::move(stream), after, archive);
}

}  // namespace streamcar::log
