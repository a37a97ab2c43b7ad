// One shared blocking read for every followed stream (SPEC 10: "all followers of a stream share
// one blocking read per stream").
//
// The hub thread owns one connection and issues one XREAD BLOCK over all followed streams, each
// from the last id it has read (`last`). What it reads goes into the stream's bounded buffer.
// The buffer holds EVERY entry of the stream with floor < id <= last (`floor` is where the shared
// read started, or the id of the last entry dropped from the buffer's front), so a follower at
// position p (the last id it returned) can take the entries above p from the buffer whenever
// floor <= p, with no gap and no duplicate.
//
// A follower below the floor (a new follower that starts in the past, or one that fell behind
// more than the buffer holds) catches up through a LogReader (archive, then Redis) on its own
// thread, a page per call, until a page ends at the top of the stream. It then joins the shared
// read when floor <= p, or starts it when nobody follows the stream yet, at floor = last =
// min(p, top), `top` being the stream's last-generated id read just before the page: a resume
// point above the top must not make the shared read wait above it for every follower.
// A caught-up follower whose position is still below the floor may jump to the floor it saw
// before that final page when that floor is at or below `top`: the page read everything up to
// the top, so nothing lies between (entries deleted with XDEL are the only way such a gap can
// exist). Ids only grow, so nothing can be added below it later.
//
// A new stream must join the XREAD at once: a second thread sends CLIENT UNBLOCK to the hub's
// connection until the hub has issued an XREAD that includes it.

#include "sidecar/log/follow_hub.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/log/log_reader.h"
#include "sidecar/redis/session.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::log {
namespace {

// Entries handed to a follower per Next(), read per stream per shared XREAD, and per catch-up
// page: small enough that a batch of large entries (say 1 MiB each) stays ~100 MiB at most.
constexpr int kBatch = 100;

size_t EntryBytes(const StreamEntry& entry) {
  size_t bytes = entry.id.size();
  for (const auto& [name, value] : entry.fields) bytes += name.size() + value.size();
  return bytes;
}

struct Buffered {
  EntryId id;
  StreamEntry entry;
  size_t bytes = 0;
};

// The shared read's state of one followed stream.
struct Feed {
  EntryId floor;  // the buffer holds every entry with floor < id <= last
  EntryId last;
  std::deque<Buffered> buffer;
  size_t bytes = 0;  // the sum of the buffered entries' bytes
  Status error;      // set when the key cannot be read as a stream (WRONGTYPE); not retried
};

}  // namespace

class FollowHub::Impl {
 public:
  Impl(redis::ConnectionOptions options, ArchiveStore* archive, FollowOptions tuning)
      : options_(std::move(options)), archive_(archive), tuning_(tuning) {
    tuning_.buffer_entries = std::max<size_t>(tuning_.buffer_entries, 1);
    tuning_.buffer_bytes = std::max<size_t>(tuning_.buffer_bytes, 1);
    redis::ConnectionOptions catch_up = options_;
    catch_up.client_name = "streamcar-follow-catchup";
    catch_up_session_ = std::make_unique<redis::Session>(catch_up, "follow-catchup", &health_);
    hub_thread_ = std::thread([this] { HubLoop(); });
    waker_thread_ = std::thread([this] { WakerLoop(); });
  }
  ~Impl() { Stop(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void Stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    stop_.Request();
    changed_.notify_all();
    if (hub_thread_.joinable()) hub_thread_.join();
    if (waker_thread_.joinable()) waker_thread_.join();
  }

  int FollowerCount(const std::string& stream) const {
    std::lock_guard lock(mutex_);
    auto it = followers_.find(stream);
    return it == followers_.end() ? 0 : it->second;
  }

  void AddFollower(const std::string& stream) {
    std::lock_guard lock(mutex_);
    ++followers_[stream];
  }

  void RemoveFollower(const std::string& stream) {
    std::lock_guard lock(mutex_);
    if (--followers_[stream] <= 0) {
      followers_.erase(stream);
      feeds_.erase(stream);  // the hub leaves it out of its next XREAD
    }
  }

  // "$": the id the stream's next entry will be above (its last-generated id, which counts
  // deleted entries too; 0-0 when the stream does not exist). nullopt when Redis cannot say.
  std::optional<EntryId> ResolveNow(const std::string& stream, Status* error) {
    std::lock_guard lock(catch_up_mutex_);
    if (!catch_up_session_->connected()) {
      Millis retry_in{0};
      *error = catch_up_session_->ConnectOnce(&retry_in);
      if (!error->ok()) return std::nullopt;
    }
    auto reply = catch_up_session_->Run(redis::Command("XINFO").Arg("STREAM").Arg(stream));
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kServerError &&
          reply.status().message().find("no such key") != std::string::npos) {
        return kMinId;
      }
      *error = reply.status();
      return std::nullopt;
    }
    const auto info = reply->view();
    for (size_t i = 0; i + 1 < info.Size(); i += 2) {
      if (info[i].Str() == "last-generated-id") {
        if (auto id = ParseId(info[i + 1].Str())) return *id;
      }
    }
    *error = Status(StatusCode::kProtocol, "XINFO STREAM gave no last-generated-id");
    return std::nullopt;
  }

  // One page of catch-up after `after`, through `archive` (null: Redis only) and Redis, and in
  // *top the stream's last-generated id read just before it: the page holds every entry up to
  // at least that top.
  StatusOr<LogPage> CatchUpPage(const std::string& stream, const EntryId& after,
                                ArchiveStore* archive, EntryId* top) {
    Status error;
    auto now = ResolveNow(stream, &error);
    if (!now) return error;
    *top = *now;
    std::lock_guard lock(catch_up_mutex_);
    LogReader reader(catch_up_session_.get(), archive);
    WindowQuery query;
    query.after = FormatId(after);
    query.count = kBatch;
    return reader.Read(stream, query);
  }

  ArchiveStore* archive() const { return archive_; }

  std::mutex& mutex() { return mutex_; }
  std::condition_variable& changed() { return changed_; }
  // The accessors below need mutex() held.
  bool stopping() const { return stopping_; }
  std::map<std::string, Feed>& feeds() { return feeds_; }
  const Status& hub_error() const { return hub_error_; }

  // Starts the shared read of `stream` after `from`, and has the hub's XREAD interrupted so that
  // it includes the stream at once. Needs mutex() held.
  void StartFeedLocked(const std::string& stream, const EntryId& from) {
    Feed feed;
    feed.floor = from;
    feed.last = from;
    feeds_.emplace(stream, std::move(feed));
    ++wanted_version_;
    changed_.notify_all();
  }

  // Waits until `deadline` or Stop.
  void PauseUntil(SteadyTime deadline) {
    std::unique_lock lock(mutex_);
    changed_.wait_until(lock, deadline, [&] { return stopping_; });
  }

 private:
  void HubLoop() {
    redis::ConnectionOptions options = options_;
    options.client_name = "streamcar-follow";
    redis::Session session(options, "follow", &health_);
    uint64_t id_generation = 0;
    while (!RunOnce(session, &id_generation)) {
    }
    std::lock_guard lock(mutex_);
    hub_done_ = true;
    changed_.notify_all();
  }

  // One shared XREAD (or one connection attempt); true when the hub is stopping.
  bool RunOnce(redis::Session& session, uint64_t* id_generation) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] {
        if (stopping_ || HasReadableFeedLocked()) return true;
        issued_version_ = wanted_version_;  // nothing to read: nothing to interrupt either
        return false;
      });
      if (stopping_) return true;
    }
    Millis retry_in{0};
    if (Status status = session.ConnectOnce(&retry_in); !status.ok()) {
      SetHubError(status);
      return stop_.WaitFor(retry_in);
    }
    if (*id_generation != session.generation()) {
      // The waker interrupts this connection by its id; a new connection has a new one.
      auto id = session.Run(redis::Command("CLIENT").Arg("ID"));
      if (!id.ok()) {
        SetHubError(id.status());
        return false;
      }
      hub_client_id_ = id->view().Integer();
      *id_generation = session.generation();
    }
    std::vector<std::pair<std::string, EntryId>> reads;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return true;
      for (const auto& [name, feed] : feeds_) {
        if (feed.error.ok()) reads.emplace_back(name, feed.last);
      }
      if (reads.empty()) return false;
      // Every stream added so far is in this XREAD: the waker may rest.
      issued_version_ = wanted_version_;
    }
    redis::Command xread("XREAD");
    xread.Arg("COUNT").Arg(int64_t{kBatch});
    xread.Arg("BLOCK").Arg(static_cast<int64_t>(tuning_.block.count()));
    xread.Arg("STREAMS");
    for (const auto& read : reads) xread.Arg(read.first);
    for (const auto& read : reads) xread.Arg(FormatId(read.second));
    auto reply = session.RunBlocking(xread, tuning_.block);
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kServerError) {
        FindUnreadableStreams(session, reads, reply.status());
      } else {
        SetHubError(reply.status());
        LogWarn("follow: the shared read failed; reconnecting",
                {{"error", reply.status().message()}});
      }
      return false;
    }
    Deliver(reply->view());
    return false;
  }

  bool HasReadableFeedLocked() const {
    return std::any_of(feeds_.begin(), feeds_.end(),
                       [](const auto& feed) { return feed.second.error.ok(); });
  }

  // An error reply to the XREAD: find the keys that are not streams (TYPE) and stop reading them
  // rather than stall every other stream; their followers get the error.
  void FindUnreadableStreams(redis::Session& session,
                             const std::vector<std::pair<std::string, EntryId>>& reads,
                             const Status& error) {
    bool found = false;
    for (const auto& [name, from] : reads) {
      auto type = session.Run(redis::Command("TYPE").Arg(name));
      if (!type.ok()) break;
      const auto kind = type->view().Str();
      if (kind == "stream" || kind == "none") continue;
      std::lock_guard lock(mutex_);
      if (auto it = feeds_.find(name); it != feeds_.end()) {
        it->second.error =
            Status(StatusCode::kServerError, "WRONGTYPE the Redis key \"" + PrintableOneLine(name) +
                                                 "\" holds another type, not a stream");
        found = true;
      }
    }
    changed_.notify_all();
    if (!found) {
      SetHubError(error);
      stop_.WaitFor(Millis(500));  // an error no key explains: do not spin on it
    }
  }

  void SetHubError(const Status& status) {
    std::lock_guard lock(mutex_);
    hub_error_ = status;
    changed_.notify_all();
  }

  // The XREAD reply: [[stream, [[id, fields], ...]], ...], or nil after the block.
  void Deliver(const redis::ReplyView& reply) {
    std::lock_guard lock(mutex_);
    hub_error_ = Status::Ok();
    for (size_t i = 0; i < reply.Size(); ++i) {
      const auto item = reply[i];
      auto it = feeds_.find(std::string(item[0].Str()));
      if (it == feeds_.end()) continue;  // nobody follows it any more
      Feed& feed = it->second;
      for (auto& entry : redis::SubscriptionOps::ParseEntries(item[1])) {
        auto id = ParseId(entry.id);
        if (!id || *id <= feed.last) continue;
        feed.last = *id;
        const size_t bytes = EntryBytes(entry);
        feed.bytes += bytes;
        feed.buffer.push_back({*id, std::move(entry), bytes});
      }
      while (!feed.buffer.empty() &&
             (feed.buffer.size() > tuning_.buffer_entries || feed.bytes > tuning_.buffer_bytes)) {
        feed.floor = feed.buffer.front().id;
        feed.bytes -= feed.buffer.front().bytes;
        feed.buffer.pop_front();
      }
    }
    changed_.notify_all();
  }

  // Interrupts the hub's XREAD until it has issued one that includes every stream added so far;
  // on Stop, until the hub thread has ended (so Stop never waits out a BLOCK).
  void WakerLoop() {
    redis::ConnectionOptions options = options_;
    options.client_name = "streamcar-follow-waker";
    redis::Session session(options, "follow-waker", &health_);
    while (true) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || issued_version_ < wanted_version_; });
        if (hub_done_) return;
      }
      const int64_t client = hub_client_id_.load();
      Millis retry_in{0};
      if (client > 0 && session.ConnectOnce(&retry_in).ok()) {
        // 0 when the hub is not blocked yet (it is about to issue the XREAD): try again shortly.
        (void)session.Run(redis::Command("CLIENT").Arg("UNBLOCK").Arg(client));
      }
      // The pace of retries, not a synchronization: the loop re-checks the state it waits for.
      std::unique_lock lock(mutex_);
      changed_.wait_for(lock, Millis(10), [&] { return hub_done_; });
    }
  }

  redis::ConnectionOptions options_;
  ArchiveStore* archive_;
  FollowOptions tuning_;
  redis::RedisHealth health_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  bool hub_done_ = false;
  std::map<std::string, int> followers_;
  std::map<std::string, Feed> feeds_;
  Status hub_error_;
  uint64_t wanted_version_ = 0;  // bumped when a stream joins the shared read
  uint64_t issued_version_ = 0;  // the wanted version the last issued XREAD includes
  std::atomic<int64_t> hub_client_id_{0};
  StopSignal stop_;

  std::mutex catch_up_mutex_;
  std::unique_ptr<redis::Session> catch_up_session_;

  std::thread hub_thread_;
  std::thread waker_thread_;
};

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

  Status Next(std::vector<StreamEntry>* out, Millis wait) override {
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
        Status status = CatchUp(out);
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
      TakeFromBuffer(feed, out);
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
        return hub_->hub_error();
      }
    }
  }

 private:
  // One page from the log; joins (or starts) the shared read once a page reaches the top.
  Status CatchUp(std::vector<StreamEntry>* out) {
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
    auto page = hub_->CatchUpPage(stream_, position_, archive_, &top);
    if (!page.ok()) return page.status();
    for (auto& entry : page->entries) out->push_back(std::move(entry));
    if (!out->empty()) position_ = *ParseId(out->back().id);
    if (page->next) return Status::Ok();  // more to catch up on
    // The page reached the stream's top: see the comment at the top of the file. The jump is
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

  void TakeFromBuffer(const Feed& feed, std::vector<StreamEntry>* out) {
    auto first = std::upper_bound(feed.buffer.begin(), feed.buffer.end(), position_,
                                  [](const EntryId& id, const Buffered& b) { return id < b.id; });
    for (auto it = first; it != feed.buffer.end() && out->size() < static_cast<size_t>(kBatch);
         ++it) {
      out->push_back(it->entry);
      position_ = it->id;
    }
  }

  std::shared_ptr<FollowHub::Impl> hub_;
  std::string stream_;
  ArchiveStore* archive_;
  EntryId position_ = kMinId;
  bool resolve_now_ = false;
  bool joined_ = false;
};

}  // namespace

FollowHub::FollowHub(redis::ConnectionOptions options, ArchiveStore* archive, FollowOptions tuning)
    : impl_(std::make_shared<Impl>(std::move(options), archive, tuning)) {}

FollowHub::~FollowHub() { impl_->Stop(); }

std::unique_ptr<Follower> FollowHub::Follow(const std::string& stream,
                                            const std::string& after_id) {
  return std::make_unique<HubFollower>(impl_, stream, after_id, impl_->archive());
}

std::unique_ptr<Follower> FollowHub::Follow(const std::string& stream, const std::string& after_id,
                                            ArchiveStore* archive) {
  return std::make_unique<HubFollower>(impl_, stream, after_id, archive);
}

int FollowHub::FollowerCount(const std::string& stream) const {
  return impl_->FollowerCount(stream);
}

void FollowHub::Stop() { impl_->Stop(); }

}  // namespace streamcar::log
