#include "sidecar/runtime/consumer_reaper.h"

#include <prometheus/counter.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <random>
#include <span>
#include <utility>

#include "sidecar/common/duration.h"
#include "sidecar/common/log.h"
#include "sidecar/redis/acl_refusal.h"
#include "sidecar/redis/consumer_reaping.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::runtime {
namespace {

// The ACL rules of each command a pass sends, for the error of a refusal that names none.
constexpr std::string_view kListRules = "+xinfo|consumers";
constexpr std::string_view kRefreshRules = "+xreadgroup";
// A refusal of EVALSHA itself is a NOPERM that names it; one inside the script on Redis 7.0
// names neither of the two commands the script runs.
constexpr std::string_view kScriptRules = "+xinfo|consumers +xgroup|delconsumer";
constexpr std::string_view kLoadRules = "+script|load";

}  // namespace

Millis ConsumerReaper::FirstPassOffset(uint64_t random) {
  return Millis(static_cast<int64_t>(random % static_cast<uint64_t>(kEvery.count())));
}

Millis ConsumerReaper::FirstPassOffsetForProcess() {
  if (const char* text = std::getenv("STREAMCAR_TEST_REAP_OFFSET");
      text != nullptr && *text != '\0') {
    std::string error;
    const std::optional<Millis> offset = ParseDuration(text, &error);
    if (offset && *offset < kEvery) return *offset;
  }
  std::random_device device;
  return FirstPassOffset((static_cast<uint64_t>(device()) << 32) | device());
}

ConsumerReaper::ConsumerReaper(std::string subscription, std::string stream, std::string group,
                               std::string consumer, Millis reap_idle, SteadyTime first_pass_at,
                               prometheus::Counter* reaped)
    : subscription_(std::move(subscription)),
      stream_(std::move(stream)),
      group_(std::move(group)),
      consumer_(std::move(consumer)),
      reap_idle_(reap_idle),
      reaped_(reaped),
      next_pass_at_(first_pass_at) {}

ConsumerReaper::~ConsumerReaper() = default;

bool ConsumerReaper::Due(SteadyTime now) const {
  return !stopping_ && !turned_off_ && !done_ && now >= next_pass_at_;
}

void ConsumerReaper::Run(redis::AsyncConnection* connection, SteadyTime now,
                         std::function<void()> done) {
  next_pass_at_ = now + kEvery;
  connection_ = connection;
  done_ = std::move(done);
  candidates_.clear();
  next_ = 0;
  reloaded_ = false;
  std::weak_ptr<bool> alive = alive_;
  connection_->Send(
      redis::ListConsumers(stream_, group_), [this, alive](StatusOr<redis::Reply> reply) {
        if (alive.expired()) return;
        auto consumers = reply.ok() ? redis::ParseConsumers(reply->view())
                                    : StatusOr<std::vector<redis::ConsumerInfo>>(reply.status());
        if (!consumers.ok()) {
          Failed("XINFO CONSUMERS", kListRules, consumers.status());
          return Finish();
        }
        Listed(std::move(*consumers));
      });
}

void ConsumerReaper::Listed(std::vector<redis::ConsumerInfo> consumers) {
  candidates_ = redis::ReapCandidates(consumers, consumer_, reap_idle_);
  if (stopping_) return Finish();
  if (!redis::NeedsRefresh(consumers, consumer_, kEvery)) return RunBatch();
  std::weak_ptr<bool> alive = alive_;
  connection_->Send(redis::RefreshConsumer(stream_, group_, consumer_),
                    [this, alive](StatusOr<redis::Reply> reply) {
                      if (alive.expired()) return;
                      auto entries = reply.ok()
                                         ? redis::SubscriptionOps::ParseRead(reply->view())
                                         : StatusOr<std::vector<StreamEntry>>(reply.status());
                      if (!entries.ok()) {
                        // The pass goes on: a peer may take this consumer for idle, which costs
                        // nothing (it has nothing pending) but a line in the log.
                        Failed("XREADGROUP", kRefreshRules, entries.status());
                        if (turned_off_) return Finish();
                      } else if (!entries->empty()) {
                        recovery_requested_ = true;
                      }
                      RunBatch();
                    });
}

void ConsumerReaper::RunBatch() {
  if (stopping_ || next_ >= candidates_.size()) return Finish();
  const size_t count = std::min(kBatch, candidates_.size() - next_);
  const std::span<const std::string> names(candidates_.data() + next_, count);
  std::weak_ptr<bool> alive = alive_;
  connection_->Send(
      redis::ReapConsumers(stream_, group_, consumer_, reap_idle_, names),
      [this, alive, count](StatusOr<redis::Reply> reply) {
        if (alive.expired()) return;
        if (!reply.ok() && reply.status().IsServerError("NOSCRIPT") && !reloaded_) {
          return ReloadThenRetry();
        }
        auto results = reply.ok() ? redis::ParseReap(reply->view())
                                  : StatusOr<std::vector<redis::ReapResult>>(reply.status());
        if (!results.ok()) {
          Failed("EVALSHA", kScriptRules, results.status());
          return Finish();
        }
        for (const auto& result : *results) {
          if (result.verdict == redis::ReapVerdict::kRemoved) {
            if (reaped_ != nullptr) reaped_->Increment();
            LogInfo("consumer reaped", {{"subscription", subscription_},
                                        {"consumer", result.name},
                                        {"idle_ms", result.idle_ms},
                                        {"idle", FormatDuration(Millis(result.idle_ms))}});
          } else {
            // Listed as idle with nothing pending, but not so inside the script: it read or
            // claimed since (the race the script closes), or another replica removed it first.
            LogDebug("consumer kept", {{"subscription", subscription_},
                                       {"consumer", result.name},
                                       {"reason", redis::ReapVerdictName(result.verdict)},
                                       {"idle_ms", result.idle_ms},
                                       {"pending", result.pending}});
          }
        }
        next_ += count;
        RunBatch();
      });
}

void ConsumerReaper::ReloadThenRetry() {
  // The server forgot the script (a restart, SCRIPT FLUSH): load it, then the same batch again.
  reloaded_ = true;
  std::weak_ptr<bool> alive = alive_;
  connection_->Send(redis::ReapScript().Load(), [this, alive](StatusOr<redis::Reply> loaded) {
    if (alive.expired()) return;
    if (!loaded.ok()) {
      Failed("SCRIPT LOAD", kLoadRules, loaded.status());
      return Finish();
    }
    RunBatch();
  });
}

void ConsumerReaper::Failed(std::string_view command, std::string_view rules,
                            const Status& status) {
  if (!redis::IsAclRefusal(status)) {
    LogWarn("consumer reaping failed; trying again in a minute",
            {{"subscription", subscription_}, {"command", command}, {"error", status.message()}});
    return;
  }
  // Reaping is an opt-in cleanup: a rule it lacks must not stop delivery (the whole fleet would
  // hit it in the same minute after a rollout). One error, then no pass in this process.
  turned_off_ = true;
  LogError(
      "consumer reaping turned off: the Redis ACL user may not run a command it needs; delivery "
      "goes on (grant the rule, or set consumer.reap_idle: 0s)",
      {{"subscription", subscription_},
       {"command", command},
       {"missing_acl_rule", redis::MissingAclRule(status, rules)},
       {"error", status.message()}});
}

void ConsumerReaper::Finish() {
  auto done = std::exchange(done_, nullptr);
  candidates_.clear();
  if (done) done();
}

}  // namespace streamcar::runtime
