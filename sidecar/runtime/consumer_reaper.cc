#include "sidecar/runtime/consumer_reaper.h"

#include <prometheus/counter.h>

#include <algorithm>
#include <span>
#include <utility>

#include "sidecar/common/duration.h"
#include "sidecar/common/log.h"
#include "sidecar/redis/acl_refusal.h"
#include "sidecar/redis/consumer_reaping.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::runtime {

ConsumerReaper::ConsumerReaper(std::string subscription, std::string stream, std::string group,
                               std::string consumer, Millis reap_idle, prometheus::Counter* reaped)
    : subscription_(std::move(subscription)),
      stream_(std::move(stream)),
      group_(std::move(group)),
      consumer_(std::move(consumer)),
      reap_idle_(reap_idle),
      reaped_(reaped) {}

ConsumerReaper::~ConsumerReaper() = default;

bool ConsumerReaper::Due(SteadyTime now) const {
  return !stopping_ && !done_ && (!last_pass_ || now - *last_pass_ >= kEvery);
}

void ConsumerReaper::Run(redis::AsyncConnection* connection, SteadyTime now,
                         std::function<void(Status)> done) {
  last_pass_ = now;
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
          const bool refused = Failed("XINFO CONSUMERS", consumers.status());
          return Finish(refused ? consumers.status() : Status::Ok());
        }
        Listed(std::move(*consumers));
      });
}

void ConsumerReaper::Listed(std::vector<redis::ConsumerInfo> consumers) {
  candidates_ = redis::ReapCandidates(consumers, consumer_, reap_idle_);
  if (stopping_) return Finish(Status::Ok());
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
                        if (Failed("the own consumer's refresh", entries.status())) {
                          return Finish(entries.status());
                        }
                      } else if (!entries->empty()) {
                        recovery_requested_ = true;
                      }
                      RunBatch();
                    });
}

void ConsumerReaper::RunBatch() {
  if (stopping_ || next_ >= candidates_.size()) return Finish(Status::Ok());
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
          const bool refused = Failed("the reap script", results.status());
          return Finish(refused ? results.status() : Status::Ok());
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
      const bool refused = Failed("SCRIPT LOAD", loaded.status());
      return Finish(refused ? loaded.status() : Status::Ok());
    }
    RunBatch();
  });
}

bool ConsumerReaper::Failed(std::string_view step, const Status& status) {
  const bool refused = redis::IsAclRefusal(status);
  if (!refused) {
    LogWarn("consumer reaping failed; trying again in a minute",
            {{"subscription", subscription_}, {"step", step}, {"error", status.message()}});
  }
  return refused;
}

void ConsumerReaper::Finish(Status status) {
  auto done = std::exchange(done_, nullptr);
  candidates_.clear();
  if (done) done(std::move(status));
}

}  // namespace streamcar::runtime
