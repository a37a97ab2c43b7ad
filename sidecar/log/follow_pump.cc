// The follower pump (follow_pump.h). Each follower is in one of a few waits, and the pump's
// threads sleep until one of them is over instead of polling every follower:
//   - ready: worked as soon as a thread is free (new, or its last Next gave entries: a follower
//     catching up has more pages without any news from the hub);
//   - news: its last Next gave nothing; worked again when the hub says a shared buffer got new
//     entries (FollowHub::AddListener), or when its keep-alive is due;
//   - paused: its client has not taken its share yet; looked at again every kPausedPoll;
//   - paced: Redis was unreachable; tried again after kUnreachablePace.
// The hub's news carry a generation number, and a follower remembers the generation at the start
// of its last Next: news that arrive while it is being worked are not lost.

#include "sidecar/log/follow_pump.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "sidecar/common/text.h"
#include "sidecar/delivery/encoder.h"

namespace streamcar::log {
namespace {

// Redis unreachable: the follower is tried again after this (the wait the per-follower threads
// had), so that an outage does not turn the pump into a busy loop.
constexpr Millis kUnreachablePace{200};
// How often a paused follower's queued bytes are looked at: a client that reads again resumes
// within this.
constexpr Millis kPausedPoll{50};
// How often a follower waiting for news is checked for a client that left, so that it does not
// hold its hub follower until its next event or keep-alive.
constexpr Millis kGoneSweep{1000};

constexpr const char* kStopping = "the server is stopping";

// Appends the SSE event of `entry` (SPEC 10: the event id is the entry id, the data its JSON
// line).
void AppendEvent(const StreamEntry& entry, std::string* out) {
  *out += "id: " + entry.id + "\ndata: " + delivery::EncodeLogEntry(entry) + "\n\n";
}

}  // namespace

class FollowPump::Impl {
 public:
  Impl(FollowHub* hub, FollowPumpOptions options);
  ~Impl() { Stop(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void Add(std::unique_ptr<Follower> follower, std::vector<StreamEntry> first,
           http::Responder responder, std::function<void()> on_end);
  size_t size() const;
  void Stop();

 private:
  struct Carried;
  enum class Wait { kReady, kWorking, kNews, kPaused, kPaced };
  // What one turn of a follower came to.
  enum class Turn { kMore, kIdle, kPaused, kPaced, kEnded };

  struct Carried {
    Carried(std::unique_ptr<Follower> f, http::Responder r, std::function<void()> e)
        : follower(std::move(f)), responder(std::move(r)), on_end(std::move(e)) {}
    std::unique_ptr<Follower> follower;
    http::Responder responder;
    std::function<void()> on_end;
    // The fields below are read under mutex_ unless the follower is kWorking; then only the
    // thread working it touches them.
    Wait wait = Wait::kReady;
    uint64_t seen_generation = 0;  // the hub's news generation when its last Next started
    SteadyTime last_write;         // of an event or a keep-alive
    SteadyTime due;                // kNews: its keep-alive; kPaused, kPaced: its next look
    std::string end_reason;        // kEnded: the final comment (empty: the client left)
    // Taken from the follower and not sent yet: the first page, read before Add, or what did not
    // fit the share (an entry's text may be several times its bytes: escaped control characters).
    std::deque<StreamEntry> pending;
  };

  void Run();
  // One turn of `c`, without mutex_: its client, then at most one Next and one Send.
  Turn Work(Carried& c, size_t share);
  // Sends `c`'s pending events while its queue is below `share` (the last one may pass it).
  Turn SendPending(Carried& c, size_t share);
  void KeepAliveIfDue(Carried& c, SteadyTime now) const;
  // Files `c` after a turn. Needs mutex_ held.
  void FileLocked(uint64_t id, Carried& c, Turn turn, SteadyTime now);
  // Makes ready the followers whose wait is over; the earliest time another one's wait ends.
  // Needs mutex_ held.
  SteadyTime WakeDueLocked(SteadyTime now);
  // Ends a follower no longer in carried_: the final comment (when its client is there to read
  // it), Finish, on_end.
  static void End(Carried& c, const std::string& reason);
  size_t ShareLocked() const {
    return std::max<size_t>(options_.max_buffer_bytes / std::max<size_t>(carried_.size(), 1), 1);
  }

  FollowHub* hub_;
  FollowPumpOptions options_;
  int listener_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  uint64_t generation_ = 0;  // bumped by every piece of hub news
  uint64_t scanned_generation_ = 0;
  SteadyTime next_sweep_;
  uint64_t next_id_ = 0;
  std::map<uint64_t, std::unique_ptr<Carried>> carried_;
  std::deque<uint64_t> ready_;
  std::vector<std::thread> threads_;
};

FollowPump::Impl::Impl(FollowHub* hub, FollowPumpOptions options)
    : hub_(hub), options_(options), next_sweep_(SteadyClock::now() + kGoneSweep) {
  listener_ = hub_->AddListener([this] {
    {
      std::lock_guard lock(mutex_);
      ++generation_;
    }
    wake_.notify_all();
  });
  const int threads = std::max(options_.threads, 1);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

void FollowPump::Impl::Add(std::unique_ptr<Follower> follower, std::vector<StreamEntry> first,
                           http::Responder responder, std::function<void()> on_end) {
  auto carried =
      std::make_unique<Carried>(std::move(follower), std::move(responder), std::move(on_end));
  carried->last_write = SteadyClock::now();
  carried->pending.assign(std::make_move_iterator(first.begin()),
                          std::make_move_iterator(first.end()));
  std::unique_lock lock(mutex_);
  if (stopping_) {
    lock.unlock();
    End(*carried, kStopping);
    return;
  }
  const uint64_t id = ++next_id_;
  carried_.emplace(id, std::move(carried));
  ready_.push_back(id);
  lock.unlock();
  wake_.notify_one();
}

size_t FollowPump::Impl::size() const {
  std::lock_guard lock(mutex_);
  return carried_.size();
}

void FollowPump::Impl::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  if (listener_ != 0) hub_->RemoveListener(listener_);
  listener_ = 0;
}

void FollowPump::Impl::Run() {
  std::unique_lock lock(mutex_);
  while (true) {
    if (stopping_) {
      // End the followers no other thread is working; a worked one is ended by its thread.
      auto it = std::find_if(carried_.begin(), carried_.end(),
                             [](const auto& item) { return item.second->wait != Wait::kWorking; });
      if (it == carried_.end()) return;
      auto owned = std::move(it->second);
      carried_.erase(it);
      lock.unlock();
      End(*owned, kStopping);
      owned.reset();
      lock.lock();
      continue;
    }
    if (!ready_.empty()) {
      const uint64_t id = ready_.front();
      ready_.pop_front();
      auto it = carried_.find(id);
      if (it == carried_.end()) continue;
      Carried& c = *it->second;
      c.wait = Wait::kWorking;
      c.seen_generation = generation_;
      const size_t share = ShareLocked();
      lock.unlock();
      const Turn turn = Work(c, share);
      lock.lock();
      if (turn == Turn::kEnded || stopping_) {
        auto owned = std::move(it->second);
        carried_.erase(it);
        lock.unlock();
        End(*owned, turn == Turn::kEnded ? owned->end_reason : kStopping);
        owned.reset();  // the hub follower goes before the lock is taken again
        lock.lock();
        continue;
      }
      FileLocked(id, c, turn, SteadyClock::now());
      continue;
    }
    const SteadyTime next = WakeDueLocked(SteadyClock::now());
    if (!ready_.empty()) {
      wake_.notify_all();
      continue;
    }
    wake_.wait_until(lock, next, [&] {
      return stopping_ || !ready_.empty() || generation_ != scanned_generation_;
    });
  }
}

FollowPump::Impl::Turn FollowPump::Impl::Work(Carried& c, size_t share) {
  if (c.responder.gone()) return Turn::kEnded;
  if (!c.pending.empty()) return SendPending(c, share);
  // Paused: no Next, so the cursor stays where the client's bytes end.
  const size_t queued = c.responder.queued_bytes();
  if (queued >= share) return Turn::kPaused;
  // What is left of the share, as a hint in entry bytes: what SendPending cannot send now waits
  // in `pending`, so a follower holds about one share of entries and one of text at most.
  std::vector<StreamEntry> entries;
  const Status status = c.follower->NextWithin(&entries, Millis(0), share - queued);
  const SteadyTime now = SteadyClock::now();
  if (status.code() == StatusCode::kIo || status.code() == StatusCode::kTimeout) {
    // Redis unreachable: the follower resumes where it was; the client keeps its stream.
    KeepAliveIfDue(c, now);
    return Turn::kPaced;
  }
  if (!status.ok()) {
    // Stopped, or an error retrying cannot fix (the key became another type): the client's
    // reconnect gets the error as an answer.
    c.end_reason = status.message();
    return Turn::kEnded;
  }
  if (!entries.empty()) {
    c.pending.assign(std::make_move_iterator(entries.begin()),
                     std::make_move_iterator(entries.end()));
    return SendPending(c, share);
  }
  KeepAliveIfDue(c, now);
  return Turn::kIdle;
}

FollowPump::Impl::Turn FollowPump::Impl::SendPending(Carried& c, size_t share) {
  const size_t queued = c.responder.queued_bytes();
  std::string events;
  while (!c.pending.empty() && queued + events.size() < share) {
    AppendEvent(c.pending.front(), &events);
    c.pending.pop_front();
  }
  if (!events.empty()) {
    c.responder.Send(events);
    c.last_write = SteadyClock::now();
  }
  // What is left waits until the client has taken its bytes.
  return c.pending.empty() ? Turn::kMore : Turn::kPaused;
}

void FollowPump::Impl::KeepAliveIfDue(Carried& c, SteadyTime now) const {
  if (now - c.last_write < options_.keep_alive) return;
  c.responder.Send(": keep-alive\n\n");
  c.last_write = now;
}

void FollowPump::Impl::FileLocked(uint64_t id, Carried& c, Turn turn, SteadyTime now) {
  switch (turn) {
    case Turn::kIdle:
      if (c.seen_generation == generation_) {
        c.wait = Wait::kNews;
        c.due = c.last_write + options_.keep_alive;
        return;
      }
      break;  // news arrived while it was worked: it may have missed them
    case Turn::kPaused:
      c.wait = Wait::kPaused;
      c.due = now + kPausedPoll;
      return;
    case Turn::kPaced:
      c.wait = Wait::kPaced;
      c.due = now + kUnreachablePace;
      return;
    case Turn::kMore:
    case Turn::kEnded:
      break;
  }
  c.wait = Wait::kReady;
  ready_.push_back(id);
}

SteadyTime FollowPump::Impl::WakeDueLocked(SteadyTime now) {
  scanned_generation_ = generation_;
  const bool sweep = now >= next_sweep_;
  if (sweep) next_sweep_ = now + kGoneSweep;
  SteadyTime next = next_sweep_;
  for (auto& [id, c] : carried_) {
    if (c->wait == Wait::kReady || c->wait == Wait::kWorking) continue;
    const bool news = c->wait == Wait::kNews && c->seen_generation != generation_;
    if (news || now >= c->due || (sweep && c->responder.gone())) {
      c->wait = Wait::kReady;
      ready_.push_back(id);
    } else {
      next = std::min(next, c->due);
    }
  }
  return next;
}

void FollowPump::Impl::End(Carried& c, const std::string& reason) {
  if (!reason.empty() && !c.responder.gone()) {
    c.responder.Send(": " + PrintableOneLine(reason) + "\n\n");
  }
  c.responder.Finish();
  if (c.on_end) c.on_end();
}

FollowPump::FollowPump(FollowHub* hub, FollowPumpOptions options)
    : impl_(std::make_unique<Impl>(hub, options)) {}

FollowPump::~FollowPump() { Stop(); }

void FollowPump::Add(std::unique_ptr<Follower> follower, std::vector<StreamEntry> first,
                     http::Responder responder, std::function<void()> on_end) {
  impl_->Add(std::move(follower), std::move(first), std::move(responder), std::move(on_end));
}

size_t FollowPump::size() const { return impl_->size(); }

void FollowPump::Stop() { impl_->Stop(); }

}  // namespace streamcar::log
