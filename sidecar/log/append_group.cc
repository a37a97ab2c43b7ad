#include "sidecar/log/append_group.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "sidecar/http/service.h"

namespace streamcar::log {
namespace {

size_t BytesOf(const AppendRequest& request) {
  size_t bytes =
      request.entry_id.size() + request.idempotency_key.size() + request.shard_key.size();
  for (const auto& [name, value] : request.fields) bytes += name.size() + value.size();
  return bytes;
}

}  // namespace

AppendGroup::AppendGroup(const Producer* producer, SessionPool* sessions, Millis session_wait)
    : producer_(producer), sessions_(sessions), session_wait_(session_wait) {}

std::function<void()> AppendGroup::Append(AppendRequest request, Done done) {
  // Refused alone: a malformed append in a group would make AppendAll refuse the whole group.
  if (Status valid = producer_->Validate(request); !valid.ok()) {
    done(Outcome{valid, {}, 1});
    return {};
  }
  auto target = producer_->Target(request);
  if (!target.ok()) {
    done(Outcome{target.status(), {}, 1});
    return {};
  }
  std::string lane_key = std::move(*target);
  const size_t bytes = BytesOf(request);
  std::unique_lock lock(mutex_);
  auto [lane, created] = lanes_.try_emplace(lane_key);
  Lane& waiting = lane->second;
  if (!waiting.waiting.empty() &&
      (waiting.waiting.size() >= kMaxQueued || waiting.bytes + bytes > kMaxQueuedBytes)) {
    const size_t queued = waiting.waiting.size();
    lock.unlock();
    done(Outcome{Status(StatusCode::kTimeout, std::to_string(queued) + " appends to " + lane_key +
                                                  " are waiting for Redis already; try again"),
                 {},
                 1});
    return {};
  }
  waiting.bytes += bytes;
  waiting.waiting.push_back(Queued{std::move(request), std::move(done), bytes});
  if (!created) return {};  // its drain is running: it takes this one too
  return [this, lane_key = std::move(lane_key)] { Drain(lane_key); };
}

void AppendGroup::Drain(const std::string& lane_key) {
  std::unique_lock lock(mutex_);
  while (true) {
    auto lane = lanes_.find(lane_key);
    std::deque<Queued>& waiting = lane->second.waiting;
    if (waiting.empty()) {
      // An emptied lane goes, and with it the sign that a drain runs: the next append of this
      // target starts a drain again.
      lanes_.erase(lane);
      return;
    }
    size_t size = 0;
    size_t group_bytes = 0;
    while (size < waiting.size() && size < Producer::kMaxBatch &&
           (size == 0 || group_bytes + waiting[size].bytes <= kMaxGroupBytes)) {
      group_bytes += waiting[size].bytes;
      ++size;
    }
    lane->second.bytes -= group_bytes;
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
  // The group's answers go to the server's loop in one post (the `done`s answer through their
  // Responders), when this returns.
  http::RespondBatch answers;
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
