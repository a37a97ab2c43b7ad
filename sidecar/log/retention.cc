#include "sidecar/log/retention.h"

#include <prometheus/counter.h>

#include <algorithm>
#include <optional>

#include "sidecar/common/log.h"
#include "sidecar/keys/sharding_keys.h"

namespace streamcar::log {

namespace {

// The smaller of two limits where 0 means "off".
template <typename T>
T TighterLimit(T a, T b) {
  if (a == T{0}) return b;
  if (b == T{0}) return a;
  return std::min(a, b);
}

}  // namespace

std::vector<TrimRule> TrimRulesOf(const config::Config& config) {
  std::vector<TrimRule> rules;
  for (const auto& sub : config.subscriptions) {
    // A sharded subscription's entries and dead letters live in its shard streams (SPEC 9).
    std::vector<std::pair<std::string, std::string>> streams;  // stream, its dead-letter stream
    if (sub.sharding.enabled()) {
      for (int shard = 0; shard < sub.sharding.shards; ++shard) {
        std::string key = keys::ShardKey(sub.ShardKeyPattern(), shard);
        std::string dlq = keys::ShardDeadLetterKey(key);
        streams.emplace_back(std::move(key), std::move(dlq));
      }
    } else {
      streams.emplace_back(sub.stream, sub.dead_letter.stream);
    }
    for (const auto& [stream, dead_letters] : streams) {
      if (sub.retention.enabled()) {
        rules.push_back(
            {stream, sub.retention.max_len, sub.retention.max_age, sub.retention.interval});
      }
      if (sub.dead_letter.max_len > 0) {
        rules.push_back({dead_letters, sub.dead_letter.max_len, Millis(0), sub.retention.interval});
      }
    }
  }
  for (const auto& stream : config.streams) {
    if (stream.retention.enabled()) {
      rules.push_back({stream.name, stream.retention.max_len, stream.retention.max_age,
                       stream.retention.interval});
    }
  }
  // One rule per archived stream (one folder, one lease): the union of every rule on it.
  for (const auto& stream : config.streams) {
    if (!stream.archive) continue;
    std::optional<TrimRule> merged;
    std::vector<TrimRule> kept;
    for (auto& rule : rules) {
      if (rule.stream != stream.name) {
        kept.push_back(std::move(rule));
        continue;
      }
      if (!merged) {
        merged = rule;
        merged->interval = std::min(rule.interval, config.archive.interval);
        merged->archive = true;
        continue;
      }
      merged->max_len = TighterLimit(merged->max_len, rule.max_len);
      merged->max_age = TighterLimit(merged->max_age, rule.max_age);
      merged->interval = std::min(merged->interval, rule.interval);
    }
    if (merged) kept.push_back(*merged);
    rules = std::move(kept);
  }
  return rules;
}

RetentionBeat::RetentionBeat(std::vector<TrimRule> rules, std::unique_ptr<redis::Session> session,
                             admin::Metrics* metrics, admin::Watchdog::Loop* loop,
                             ArchiveDeps archive)
    : rules_(std::move(rules)),
      archive_(std::move(archive)),
      session_(std::move(session)),
      metrics_(metrics),
      loop_(loop) {
  for (const auto& rule : rules_) {
    if (!rule.archive || archive_.store == nullptr) {
      folders_.push_back(nullptr);
      fold_errors_.emplace_back();
      continue;
    }
    log::FolderOptions options;
    options.stream = rule.stream;
    options.holder = archive_.holder;
    options.batch = archive_.batch;
    options.max_len = rule.max_len;
    options.max_age = rule.max_age;
    // Long enough to survive a step and a late beat; a holder that died is replaced after it.
    options.lease_ttl = std::max(Millis(10000), rule.interval * 3);
    options.on_batch = [this] { loop_->Beat(); };
    folders_.push_back(std::make_unique<ArchiveFolder>(options, archive_.store, metrics_));
    fold_errors_.emplace_back();
  }
}

RetentionBeat::~RetentionBeat() { StopAndJoin(); }

void RetentionBeat::Start() {
  thread_ = std::thread([this] { Run(); });
}

void RetentionBeat::StopAndJoin() {
  stop_.Request();
  if (thread_.joinable()) thread_.join();
}

bool RetentionBeat::Fold(size_t index, bool* more) {
  const TrimRule& rule = rules_[index];
  if (!folders_[index]) {
    // Trimming an archived stream without its archive would lose what it trims.
    LogError("archived stream not trimmed: no archive is open (archive.url)",
             {{"stream", rule.stream}});
    return true;
  }
  auto step = folders_[index]->Step(*session_, &stop_);
  if (step.ok()) {
    *more = step->more;
    // Caught up: the lease goes back until the next beat, so that a manual trim (`streamcar
    // trim`) or another replica takes it at once rather than after its expiry. A release that
    // fails leaves the lease to expire: nothing is lost either way.
    if (!step->more && step->token > 0) (void)folders_[index]->ReleaseLease(*session_);
    return true;
  }
  // The same failure on every beat (an archive that cannot open yet, on a 50 ms interval) is
  // logged once a minute, a new one at once.
  auto& last = fold_errors_[index];
  const auto now = SteadyClock::now();
  if (last.message != step.status().message() || now - last.logged >= Millis(60000)) {
    last = {step.status().message(), now};
    LogError("archive fold failed; nothing was trimmed that is not archived",
             {{"stream", rule.stream}, {"error", step.status().message()}});
  }
  return session_->connected();
}

bool RetentionBeat::Trim(size_t index, bool* more) {
  *more = false;
  const TrimRule& rule = rules_[index];
  if (rule.archive) return Fold(index, more);
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
      bool more = false;
      if (Trim(i, &more)) next[i] = more ? SteadyClock::now() : now + rules_[i].interval;
      // A pass over many rules (each fold step up to its budget) must not look wedged.
      loop_->Beat();
    }
    const auto wake = *std::min_element(next.begin(), next.end());
    const auto wait = std::clamp(std::chrono::duration_cast<Millis>(wake - SteadyClock::now()),
                                 Millis(10), Millis(1000));
    if (stop_.WaitFor(wait)) break;
  }
  loop_->Retire();
}

}  // namespace streamcar::log
