#include "sidecar/consumer/retention.h"

#include <prometheus/counter.h>

#include <algorithm>

#include "sidecar/common/log.h"

namespace streamcar::consumer {

std::vector<TrimRule> TrimRulesOf(const config::Config& config) {
  std::vector<TrimRule> rules;
  for (const auto& sub : config.subscriptions) {
    if (sub.retention.enabled()) {
      rules.push_back(
          {sub.stream, sub.retention.max_len, sub.retention.max_age, sub.retention.interval});
    }
    if (sub.dead_letter.max_len > 0) {
      rules.push_back(
          {sub.dead_letter.stream, sub.dead_letter.max_len, Millis(0), sub.retention.interval});
    }
  }
  return rules;
}

RetentionBeat::RetentionBeat(std::vector<TrimRule> rules, std::unique_ptr<redis::Session> session,
                             admin::Metrics* metrics, admin::Watchdog::Loop* loop)
    : rules_(std::move(rules)), session_(std::move(session)), metrics_(metrics), loop_(loop) {}

RetentionBeat::~RetentionBeat() { StopAndJoin(); }

void RetentionBeat::Start() {
  thread_ = std::thread([this] { Run(); });
}

void RetentionBeat::StopAndJoin() {
  stop_.Request();
  if (thread_.joinable()) thread_.join();
}

bool RetentionBeat::Trim(const TrimRule& rule) {
  auto& trimmed = metrics_->Trimmed(rule.stream);
  auto trim_once = [&](const redis::Command& command) -> std::optional<int64_t> {
    auto reply = session_->Run(command);
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kServerError) {
        LogError("retention trim failed",
                 {{"stream", rule.stream}, {"error", reply.status().message()}});
        return 0;
      }
      return std::nullopt;
    }
    const int64_t n = reply->view().Integer();
    trimmed.Increment(static_cast<double>(n));
    return n;
  };
  // Repeat while a call removed as much as its LIMIT allows: a large backlog is caught up over a
  // few calls, each bounded, instead of one long one.
  auto trim_until_done = [&](auto make_command) -> bool {
    for (int call = 0; call < kCallsPerBeat && !stop_.requested(); ++call) {
      auto n = trim_once(make_command());
      if (!n) return false;
      if (*n < kLimitPerCall) break;
    }
    return true;
  };
  if (rule.max_len > 0) {
    bool ok = trim_until_done([&] {
      return redis::Command("XTRIM")
          .Arg(rule.stream)
          .Arg("MAXLEN")
          .Arg("~")
          .Arg(rule.max_len)
          .Arg("LIMIT")
          .Arg(kLimitPerCall);
    });
    if (!ok) return false;
  }
  if (rule.max_age.count() > 0) {
    const int64_t min_ms = SystemClock::Instance().WallMillis() - rule.max_age.count();
    bool ok = trim_until_done([&] {
      return redis::Command("XTRIM")
          .Arg(rule.stream)
          .Arg("MINID")
          .Arg("~")
          .Arg(std::to_string(std::max<int64_t>(0, min_ms)) + "-0")
          .Arg("LIMIT")
          .Arg(kLimitPerCall);
    });
    if (!ok) return false;
  }
  return true;
}

void RetentionBeat::Run() {
  std::vector<SteadyTime> next(rules_.size(), SteadyClock::now());
  while (!stop_.requested()) {
    loop_->Beat();
    if (Status s = session_->EnsureConnected(stop_); !s.ok()) {
      if (s.code() == StatusCode::kCancelled) break;
      LogError("retention beat cannot connect", {{"error", s.message()}});
      if (stop_.WaitFor(Millis(5000))) break;
      continue;
    }
    const auto now = SteadyClock::now();
    for (size_t i = 0; i < rules_.size(); ++i) {
      if (now < next[i]) continue;
      if (Trim(rules_[i])) next[i] = now + rules_[i].interval;
    }
    const auto wake = *std::min_element(next.begin(), next.end());
    const auto wait = std::clamp(std::chrono::duration_cast<Millis>(wake - SteadyClock::now()),
                                 Millis(10), Millis(1000));
    if (stop_.WaitFor(wait)) break;
  }
  loop_->Retire();
}

}  // namespace streamcar::consumer
