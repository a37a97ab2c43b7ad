// A minimal FollowPump (log/follow_pump.h) for the log API's service: each follower belongs to one
// pump thread (its lane), which polls it without waiting, skips it while its client has its share
// of the buffer unread, and sleeps briefly after a pass that moved nothing.

#include "sidecar/log/follow_pump.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "sidecar/delivery/encoder.h"

namespace streamcar::log {
namespace {

// How long a lane rests after a pass that moved nothing.
constexpr Millis kIdlePass{50};

std::string Events(const std::vector<StreamEntry>& entries) {
  std::string out;
  for (const auto& entry : entries) {
    out += "id: " + entry.id + "\ndata: " + delivery::EncodeLogEntry(entry) + "\n\n";
  }
  return out;
}

}  // namespace

class FollowPump::Impl {
 public:
  Impl(FollowHub* hub, FollowPumpOptions options) : options_(options) {
    (void)hub;  // the followers were made by it; they need nothing more of it here
    const int threads = std::max(1, options_.threads);
    for (int lane = 0; lane < threads; ++lane) {
      threads_.emplace_back([this, lane] { Run(lane); });
    }
  }

  ~Impl() { Stop(); }

  void Add(std::unique_ptr<Follower> follower, std::vector<StreamEntry> first,
           http::Responder responder, std::function<void()> on_end) {
    auto carried = std::make_shared<Carried>(
        Carried{std::move(follower), std::move(responder), std::move(on_end), SteadyClock::now(),
                next_lane_++ % threads_.size(), std::move(first)});
    {
      std::lock_guard lock(mutex_);
      if (!stopping_) {
        carried_.push_back(carried);
        return;
      }
    }
    End(*carried, "the API is stopping");
  }

  size_t size() const {
    std::lock_guard lock(mutex_);
    return carried_.size();
  }

  void Stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopping_ && threads_.empty()) return;
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& thread : threads_) thread.join();
    threads_.clear();
    std::vector<std::shared_ptr<Carried>> left;
    {
      std::lock_guard lock(mutex_);
      left.swap(carried_);
    }
    for (auto& carried : left) End(*carried, "the API is stopping");
  }

 private:
  struct Carried {
    std::unique_ptr<Follower> follower;
    http::Responder responder;
    std::function<void()> on_end;
    SteadyTime last_write;
    size_t lane = 0;
    std::vector<StreamEntry> pending;  // the first page, sent by the lane's first step
  };

  static void End(Carried& carried, std::string_view reason) {
    carried.responder.Send(": " + std::string(reason) + "\n\n");
    carried.responder.Finish();
    carried.follower.reset();
    if (carried.on_end) carried.on_end();
  }

  size_t Share(size_t followers) const {
    return std::max(kMinShare, options_.max_buffer_bytes / std::max<size_t>(1, followers));
  }

  // Moves one follower along; false when it ended.
  bool Step(Carried& carried, size_t share, bool* moved) {
    if (carried.responder.gone()) {
      carried.follower.reset();
      if (carried.on_end) carried.on_end();
      return false;
    }
    const SteadyTime now = SteadyClock::now();
    if (!carried.pending.empty()) {
      carried.responder.Send(Events(carried.pending));
      carried.pending.clear();
      carried.last_write = now;
      *moved = true;
      return true;
    }
    if (carried.responder.queued_bytes() < share) {
      std::vector<StreamEntry> entries;
      const Status status = carried.follower->Next(&entries, Millis(0));
      if (!status.ok() && status.code() != StatusCode::kIo &&
          status.code() != StatusCode::kTimeout) {
        End(carried, status.code() == StatusCode::kCancelled ? "the API is stopping"
                                                             : "error: " + status.message());
        return false;
      }
      if (!entries.empty()) {
        carried.responder.Send(Events(entries));
        carried.last_write = now;
        *moved = true;
        return true;
      }
    }
    if (now - carried.last_write >= options_.keep_alive) {
      carried.responder.Send(": keep-alive\n\n");
      carried.last_write = now;
    }
    return true;
  }

  void Run(size_t lane) {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      std::vector<std::shared_ptr<Carried>> mine;
      for (const auto& carried : carried_) {
        if (carried->lane == lane) mine.push_back(carried);
      }
      const size_t share = Share(carried_.size());
      lock.unlock();
      bool moved = false;
      std::vector<Carried*> ended;
      for (const auto& carried : mine) {
        if (!Step(*carried, share, &moved)) ended.push_back(carried.get());
      }
      lock.lock();
      std::erase_if(carried_, [&](const std::shared_ptr<Carried>& c) {
        return std::find(ended.begin(), ended.end(), c.get()) != ended.end();
      });
      if (!moved) wake_.wait_for(lock, kIdlePass, [&] { return stopping_; });
    }
  }

  const FollowPumpOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<Carried>> carried_;  // guarded by mutex_
  bool stopping_ = false;                          // guarded by mutex_
  std::atomic<size_t> next_lane_{0};
  std::vector<std::thread> threads_;
};

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
