#include "sidecar/admin/health.h"

namespace streamcar::admin {

Watchdog::Loop* Watchdog::Register(const std::string& name, Millis limit) {
  auto loop = std::make_unique<Loop>();
  loop->clock_ = clock_;
  loop->name_ = name;
  loop->limit_ = limit;
  loop->Beat();
  std::lock_guard lock(mutex_);
  std::erase_if(loops_, [](const std::unique_ptr<Loop>& old) { return old->retired_.load(); });
  loops_.push_back(std::move(loop));
  return loops_.back().get();
}

size_t Watchdog::kept() const {
  std::lock_guard lock(mutex_);
  return loops_.size();
}

std::string Watchdog::FindWedged() const {
  const int64_t now = clock_->Now().time_since_epoch().count();
  std::lock_guard lock(mutex_);
  for (const auto& loop : loops_) {
    if (loop->retired_) continue;
    const auto silent =
        std::chrono::nanoseconds(now - loop->last_ns_.load(std::memory_order_relaxed));
    if (silent > loop->limit_) return loop->name_;
  }
  return {};
}

void Readiness::SetRefused(const std::string& source, std::string reason) {
  std::lock_guard lock(refused_mutex_);
  if (reason.empty()) {
    refused_.erase(source);
  } else {
    refused_[source] = std::move(reason);
  }
}

std::string Readiness::WhyNotReady(bool redis_up) const {
  if (shutting_down_) return "shutting down";
  if (!redis_up) return "redis not connected";
  {
    std::lock_guard lock(refused_mutex_);
    if (!refused_.empty()) return refused_.begin()->first + ": " + refused_.begin()->second;
  }
  if (!groups_ready_) return "consumer groups not ensured yet";
  return {};
}

}  // namespace streamcar::admin
