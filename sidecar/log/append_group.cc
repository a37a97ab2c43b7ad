#include "sidecar/log/append_group.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace streamcar::log {

AppendGroup::AppendGroup(const Producer* producer, SessionPool* sessions, Millis session_wait)
    : producer_(producer), sessions_(sessions), session_wait_(session_wait) {}

std::function<void()> AppendGroup::Append(AppendRequest request, Done done) {
  // Refused alone: a malformed append in a group would make AppendAll refuse the whole group.
  if (Status valid = producer_->Validate(request); !valid.ok()) {
    done(Outcome{valid, {}, 1});
    return {};
  }
  std::string lane_key = request.shard_key;
  std::lock_guard lock(mutex_);
  auto [lane, created] = lanes_.try_emplace(lane_key);
  lane->second.waiting.push_back(Queued{std::move(request), std::move(done)});
  if (!created) return {};  // its drain is running: it takes this one too
  return [this, lane_key = std::move(lane_key)] { Drain(lane_key); };
}

void AppendGroup::Drain(const std::string& lane_key) {
  std::unique_lock lock(mutex_);
  while (true) {
    auto lane = lanes_.find(lane_key);
    std::deque<Queued>& waiting = lane->second.waiting;
    if (waiting.empty()) {
      // Emptied lanes go: a sharded stream has one per entry key, and keys seen once must not
      // accumulate. The next append starts a drain again.
      lanes_.erase(lane);
      return;
    }
    const size_t size = std::min(waiting.size(), Producer::kMaxBatch);
    std::deque<Queued> group(std::make_move_iterator(waiting.begin()),
                             std::make_move_iterator(waiting.begin() + static_cast<long>(size)));
    waiting.erase(waiting.begin(), waiting.begin() + static_cast<long>(size));
    ++groups_sent_;
    appends_sent_ += size;
    lock.unlock();
    Send(std::move(group));
    lock.lock();
  }
}

void AppendGroup::Send(std::deque<Queued> group) {
  std::vector<AppendRequest> requests;
  requests.reserve(group.size());
  for (Queued& queued : group) requests.push_back(std::move(queued.request));

  int retry_after = 1;
  StatusOr<std::vector<AppendResult>> results = Status(StatusCode::kIo, "not sent");
  {
    auto lease = sessions_->Acquire(session_wait_, &retry_after);
    if (!lease.ok()) {
      for (Queued& queued : group) queued.done(Outcome{lease.status(), {}, retry_after});
      return;
    }
    results = producer_->AppendAll(lease->session(), requests);
  }  // the session goes back before the answers go out
  for (size_t i = 0; i < group.size(); ++i) {
    group[i].done(results.ok() ? Outcome{Status::Ok(), std::move((*results)[i]), 1}
                               : Outcome{results.status(), {}, 1});
  }
}

uint64_t AppendGroup::groups_sent() const {
  std::lock_guard lock(mutex_);
  return groups_sent_;
}

uint64_t AppendGroup::appends_sent() const {
  std::lock_guard lock(mutex_);
  return appends_sent_;
}

}  // namespace streamcar::log
