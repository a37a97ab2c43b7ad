#include "sidecar/consumer/dispatcher.h"

#include <algorithm>

namespace streamcar::consumer {

Dispatcher::Dispatcher(size_t capacity, std::string key_field, uint64_t max_held_bytes)
    : capacity_(capacity),
      key_field_(std::move(key_field)),
      max_held_bytes_(max_held_bytes),
      min_read_(std::max<size_t>(1, capacity / 4)) {}

uint64_t Dispatcher::PayloadBytes(const StreamEntry& entry) {
  uint64_t bytes = 0;
  for (const auto& [field, value] : entry.fields) bytes += field.size() + value.size();
  return bytes;
}

uint64_t Dispatcher::SizeEstimate() const {
  return *std::max_element(recent_sizes_.begin(), recent_sizes_.end());
}

size_t Dispatcher::ReadRoom() const {
  const size_t room = held_.size() >= capacity_ ? 0 : capacity_ - held_.size();
  if (room == 0 || max_held_bytes_ == kNoByteLimit) return room;
  const uint64_t estimate = SizeEstimate();
  // No size seen yet: one round of the workers (concurrency x batch_size), so a first batch is
  // full, and an unknown size costs at most a quarter of what the entry capacity allows.
  if (estimate == 0) return std::min(room, min_read_);
  const uint64_t free_bytes = held_bytes_ >= max_held_bytes_ ? 0 : max_held_bytes_ - held_bytes_;
  // One read brings at most a quarter of the budget (or one entry, when one is larger), so the
  // read's reply buffers (the socket buffer and the parsed reply, both alive while the entries
  // are copied out) stay small too.
  const uint64_t per_read = std::max<uint64_t>(1, max_held_bytes_ / 4 / estimate);
  const uint64_t fits = std::min(free_bytes / estimate, per_read);
  // Nothing held: one entry is read whatever its size (SPEC 4.2: taken, alone).
  if (fits == 0) return held_.empty() ? 1 : 0;
  return static_cast<size_t>(std::min<uint64_t>(room, fits));
}

bool Dispatcher::WorthReading() const {
  const size_t room = ReadRoom();
  if (room == 0) return false;
  if (room >= min_read_ || ready_.empty()) return true;
  // Large entries: a quarter of the byte budget free is worth a read even when it is fewer
  // entries than a quarter of the capacity.
  return max_held_bytes_ != kNoByteLimit && held_bytes_ < max_held_bytes_ &&
         max_held_bytes_ - held_bytes_ >= max_held_bytes_ / 4;
}

size_t Dispatcher::Room() const {
  std::lock_guard lock(mutex_);
  return ReadRoom();
}

uint64_t Dispatcher::HeldBytes() const {
  std::lock_guard lock(mutex_);
  return held_bytes_;
}

size_t Dispatcher::Held() const {
  std::lock_guard lock(mutex_);
  return held_.size();
}

bool Dispatcher::Holds(const std::string& id) const {
  std::lock_guard lock(mutex_);
  return held_.contains(id);
}

size_t Dispatcher::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

bool Dispatcher::Paused(SteadyTime now) const {
  return health_paused_ || now < handler_paused_until_;
}

bool Dispatcher::ReadPaused(SteadyTime now) const {
  // While the handler refuses, the held entries are retried on their own; reading more would only
  // pile entries up. With nothing held, one read is the only way to try the handler again.
  return Paused(now) || (handler_down_ && !held_.empty());
}

size_t Dispatcher::WaitForRoom(Millis timeout) {
  std::unique_lock lock(mutex_);
  const auto deadline = SteadyClock::now() + timeout;
  while (true) {
    if (stopped_) return 0;
    const auto now = SteadyClock::now();
    // While the handler is down, reading more would only pile entries up in memory.
    if (WorthReading() && !ReadPaused(now)) return ReadRoom();
    if (now >= deadline) return 0;
    auto until = deadline;
    if (!health_paused_ && now < handler_paused_until_)
      until = std::min(until, handler_paused_until_);
    room_cv_.wait_until(lock, until);
  }
}

void Dispatcher::MakeReady(HeldEntry* entry, bool front) {
  entry->state = HeldEntry::State::kQueued;
  if (front) {
    ready_.push_front(entry);
  } else {
    ready_.push_back(entry);
  }
}

size_t Dispatcher::Admit(std::vector<StreamEntry> entries) {
  size_t admitted = 0;
  {
    std::lock_guard lock(mutex_);
    for (auto& entry : entries) {
      if (held_.contains(entry.id)) continue;
      auto held = std::make_unique<HeldEntry>();
      held->bytes = PayloadBytes(entry);
      held_bytes_ += held->bytes;
      recent_sizes_[recent_next_] = held->bytes;
      recent_next_ = (recent_next_ + 1) % kSizeWindow;
      if (!key_field_.empty()) {
        if (const std::string* key = entry.Find(key_field_)) held->key = *key;
      }
      held->entry = std::move(entry);
      HeldEntry* raw = held.get();
      held_.emplace(raw->entry.id, std::move(held));
      ++admitted;
      if (raw->key) {
        auto [lane, inserted] = lanes_.try_emplace(*raw->key);
        if (!inserted) {
          raw->state = HeldEntry::State::kBlocked;
          lane->second.waiting.push_back(raw);
          continue;
        }
      }
      MakeReady(raw, false);
    }
  }
  if (admitted == 1) {
    work_cv_.notify_one();
  } else if (admitted > 1) {
    work_cv_.notify_all();
  }
  return admitted;
}

std::vector<HeldEntry*> Dispatcher::TakeWork(size_t max, Millis timeout) {
  std::vector<HeldEntry*> work;
  std::unique_lock lock(mutex_);
  const auto deadline = SteadyClock::now() + timeout;
  while (true) {
    if (stopped_) return work;
    const auto now = SteadyClock::now();
    if (!ready_.empty() && !Paused(now)) break;
    if (now >= deadline) return work;
    auto until = deadline;
    if (!health_paused_ && now < handler_paused_until_)
      until = std::min(until, handler_paused_until_);
    work_cv_.wait_until(lock, until);
  }
  const size_t n = std::min(max, ready_.size());
  work.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    HeldEntry* entry = ready_.front();
    ready_.pop_front();
    entry->state = HeldEntry::State::kInFlight;
    entry->posted = true;
    work.push_back(entry);
  }
  in_flight_ += n;
  // More work left: let another worker take it. None left: the reader may want to refill.
  if (!ready_.empty()) {
    work_cv_.notify_one();
  } else if (WorthReading()) {
    room_cv_.notify_one();
  }
  return work;
}

void Dispatcher::HoldForHandler(const std::vector<HeldEntry*>& entries, Millis pause) {
  {
    std::lock_guard lock(mutex_);
    // Back to the front in their original order; an entry a keepalive found another consumer's
    // meanwhile is let go instead (SPEC 3.2: never delivered again here).
    for (size_t i = entries.size(); i-- > 0;) {
      HeldEntry* entry = entries[i];
      if (entry->lost) {
        ReleaseLocked(entry);
        continue;
      }
      --in_flight_;
      entry->posted = false;
      MakeReady(entry, true);
    }
    handler_down_ = true;
    handler_paused_until_ = std::max(handler_paused_until_, SteadyClock::now() + pause);
  }
  work_cv_.notify_all();
}

void Dispatcher::HandlerAnswered() {
  {
    std::lock_guard lock(mutex_);
    if (handler_paused_until_ == SteadyTime{} && !handler_down_) return;
    handler_paused_until_ = SteadyTime{};
    handler_down_ = false;
  }
  work_cv_.notify_all();
  room_cv_.notify_all();
}

bool Dispatcher::handler_paused() const {
  std::lock_guard lock(mutex_);
  return Paused(SteadyClock::now());
}

void Dispatcher::SetHealthPaused(bool paused) {
  {
    std::lock_guard lock(mutex_);
    health_paused_ = paused;
  }
  work_cv_.notify_all();
  room_cv_.notify_all();
}

void Dispatcher::MarkSettling(HeldEntry* entry) {
  std::lock_guard lock(mutex_);
  if (entry->state == HeldEntry::State::kInFlight) --in_flight_;
  entry->state = HeldEntry::State::kSettling;
}

void Dispatcher::ScheduleRetry(HeldEntry* entry, SteadyTime at) {
  std::lock_guard lock(mutex_);
  if (entry->state == HeldEntry::State::kInFlight) --in_flight_;
  entry->state = HeldEntry::State::kWaitingRetry;
  entry->retry_at = at;
  retries_.emplace(at, entry);
}

std::vector<HeldEntry*> Dispatcher::TakeDueRetries(SteadyTime now) {
  std::vector<HeldEntry*> due;
  std::lock_guard lock(mutex_);
  while (!retries_.empty() && retries_.begin()->first <= now) {
    HeldEntry* entry = retries_.begin()->second;
    retries_.erase(retries_.begin());
    entry->state = HeldEntry::State::kSettling;
    due.push_back(entry);
  }
  return due;
}

std::optional<SteadyTime> Dispatcher::NextRetryAt() const {
  std::lock_guard lock(mutex_);
  if (retries_.empty()) return std::nullopt;
  return retries_.begin()->first;
}

void Dispatcher::Requeue(HeldEntry* entry) {
  {
    std::lock_guard lock(mutex_);
    entry->posted = false;
    MakeReady(entry, true);
  }
  work_cv_.notify_one();
}

void Dispatcher::ReleaseLocked(HeldEntry* entry) {
  if (entry->state == HeldEntry::State::kInFlight) --in_flight_;
  if (entry->state == HeldEntry::State::kWaitingRetry) {
    for (auto it = retries_.lower_bound(entry->retry_at);
         it != retries_.end() && it->first == entry->retry_at; ++it) {
      if (it->second == entry) {
        retries_.erase(it);
        break;
      }
    }
  }
  if (entry->state == HeldEntry::State::kQueued) {
    ready_.erase(std::remove(ready_.begin(), ready_.end(), entry), ready_.end());
  }
  if (entry->key) {
    auto lane = lanes_.find(*entry->key);
    if (lane != lanes_.end()) {
      auto& waiting = lane->second.waiting;
      auto self = std::find(waiting.begin(), waiting.end(), entry);
      if (self != waiting.end()) {
        waiting.erase(self);  // released while still blocked: the lane's head is still out
      } else if (waiting.empty()) {
        lanes_.erase(lane);
      } else {
        HeldEntry* next = waiting.front();
        waiting.pop_front();
        MakeReady(next, false);
      }
    }
  }
  held_bytes_ -= entry->bytes;
  held_.erase(entry->entry.id);  // destroys *entry
}

void Dispatcher::Release(HeldEntry* entry) {
  bool wake_reader = false;
  {
    std::lock_guard lock(mutex_);
    ReleaseLocked(entry);
    wake_reader = WorthReading();
  }
  work_cv_.notify_one();
  if (wake_reader) room_cv_.notify_one();  // the reader is its only waiter
}

Dispatcher::LostResult Dispatcher::MarkLost(const std::string& id) {
  {
    std::lock_guard lock(mutex_);
    auto it = held_.find(id);
    if (it == held_.end()) return LostResult::kIgnored;
    HeldEntry* entry = it->second.get();
    switch (entry->state) {
      case HeldEntry::State::kInFlight:
        if (entry->lost) return LostResult::kIgnored;  // counted at the first keepalive
        entry->lost = true;
        return LostResult::kDropped;
      case HeldEntry::State::kSettling:
        return LostResult::kIgnored;
      case HeldEntry::State::kQueued:
      case HeldEntry::State::kBlocked:
      case HeldEntry::State::kWaitingRetry:
        ReleaseLocked(entry);
        break;
    }
  }
  work_cv_.notify_one();
  room_cv_.notify_one();
  return LostResult::kDropped;
}

std::vector<std::string> Dispatcher::UnpostedIds() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> ids;
  for (const auto& [id, entry] : held_) {
    if (!entry->posted) ids.push_back(id);
  }
  return ids;
}

std::vector<std::string> Dispatcher::HeldIds() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> ids;
  ids.reserve(held_.size());
  for (const auto& [id, entry] : held_) ids.push_back(id);
  return ids;
}

void Dispatcher::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  work_cv_.notify_all();
  room_cv_.notify_all();
}

bool Dispatcher::stopped() const {
  std::lock_guard lock(mutex_);
  return stopped_;
}

}  // namespace streamcar::consumer
