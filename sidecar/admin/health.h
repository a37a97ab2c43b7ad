#pragma once
// Liveness and readiness (SPEC section 5). Every loop of the process registers with the watchdog
// and beats; /healthz fails once one has been silent longer than its own limit. Readiness is
// Redis connected + every group ensured + not shutting down. Thread-safe.

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sidecar/common/clock.h"

namespace streamcar::admin {

class Watchdog {
 public:
  // `clock` (not owned) must outlive the watchdog; tests pass a ManualClock.
  explicit Watchdog(const Clock* clock = &SystemClock::Instance()) : clock_(clock) {}

  class Loop {
   public:
    void Beat() {
      last_ns_.store(clock_->Now().time_since_epoch().count(), std::memory_order_relaxed);
    }
    // Beats stop being checked (the loop ended on purpose). The owner's last use of the loop:
    // the watchdog forgets it at a later Register (a sharded subscription's shard loops come and
    // go with their grants).
    void Retire() { retired_ = true; }

   private:
    friend class Watchdog;
    const Clock* clock_ = nullptr;
    std::string name_;
    Millis limit_{0};
    std::atomic<int64_t> last_ns_{0};
    std::atomic<bool> retired_{false};
  };

  // A loop that must beat at least every `limit`. The pointer lives as long as the Watchdog.
  Loop* Register(const std::string& name, Millis limit);
  // The limit of a loop whose longest blocking step takes `longest_step` (a handler timeout, a
  // Redis command timeout, a heartbeat interval plus its command): twice that, and 30 s more so
  // that a slow machine is never called wedged. The one formula every loop registers with.
  static Millis LimitFor(Millis longest_step) { return longest_step * 2 + Millis(30000); }
  // Empty when all loops are alive; otherwise the name of a wedged one.
  std::string FindWedged() const;
  // Loops kept: the registered ones, less the retired ones forgotten since.
  size_t kept() const;

 private:
  const Clock* clock_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Loop>> loops_;
};

class Readiness {
 public:
  void SetGroupsReady(bool ready) { groups_ready_ = ready; }
  void SetShuttingDown() { shutting_down_ = true; }
  // A part of the process that cannot serve (a sharded subscription's coordinator refuses its
  // configuration) says why; "" clears it. Any thread.
  void SetRefused(const std::string& source, std::string reason);
  bool shutting_down() const { return shutting_down_; }
  // Why not ready ("" when ready); `redis_up` comes from the sessions' shared health.
  std::string WhyNotReady(bool redis_up) const;

 private:
  std::atomic<bool> groups_ready_{false};
  mutable std::mutex refused_mutex_;
  std::map<std::string, std::string> refused_;  // source -> why
  std::atomic<bool> shutting_down_{false};
};

}  // namespace streamcar::admin
