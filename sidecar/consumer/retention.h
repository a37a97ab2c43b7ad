#pragma once
// The retention beat (SPEC 4.4): for every subscription with `retention` set, and every dead-letter
// stream with `dead_letter.max_len`, an XTRIM on its own interval, whether or not anything is
// consumed (a stream nobody drains is trimmed too). One thread and one Redis connection for all of
// them. Trimming is idempotent, so every replica may run it.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/admin/health.h"
#include "sidecar/admin/metrics.h"
#include "sidecar/common/clock.h"
#include "sidecar/common/stop_signal.h"
#include "sidecar/config/config.h"
#include "sidecar/redis/session.h"

namespace streamcar::consumer {

// One stream to trim and how.
struct TrimRule {
  std::string stream;
  int64_t max_len = 0;  // XTRIM MAXLEN ~ max_len (0: off)
  Millis max_age{0};    // XTRIM MINID ~ now-max_age (0: off)
  Millis interval{60000};
};

// The rules a configuration asks for: each subscription's `retention`, and each dead-letter
// stream's `max_len` (on the subscription's retention interval).
std::vector<TrimRule> TrimRulesOf(const config::Config& config);

class RetentionBeat {
 public:
  // The most entries one XTRIM call may remove (its LIMIT): bounds the time Redis spends in it.
  static constexpr int64_t kLimitPerCall = 10000;
  // A beat repeats a trim that hit the limit at most this many times, then waits for the next.
  static constexpr int kCallsPerBeat = 10;

  RetentionBeat(std::vector<TrimRule> rules, std::unique_ptr<redis::Session> session,
                admin::Metrics* metrics, admin::Watchdog::Loop* loop);
  ~RetentionBeat();
  void Start();
  void StopAndJoin();

 private:
  void Run();
  // Trims one rule; returns false when Redis could not be reached.
  bool Trim(const TrimRule& rule);

  std::vector<TrimRule> rules_;
  std::unique_ptr<redis::Session> session_;
  admin::Metrics* metrics_;
  admin::Watchdog::Loop* loop_;
  StopSignal stop_;
  std::thread thread_;
};

}  // namespace streamcar::consumer
