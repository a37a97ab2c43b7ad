#include "sidecar/consumer/worker.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include "sidecar/common/backoff.h"
#include "sidecar/common/log.h"
#include "sidecar/delivery/response_parser.h"

namespace streamcar::consumer {

Worker::Worker(const config::Subscription& subscription, Dispatcher* dispatcher, Settler* settler,
               admin::SubscriptionMetrics* metrics, admin::Watchdog::Loop* loop)
    : sub_(subscription),
      dispatcher_(dispatcher),
      settler_(settler),
      metrics_(metrics),
      loop_(loop),
      policy_(delivery::OutcomePolicyOf(subscription)),
      context_{subscription.stream, subscription.group, &subscription.handler},
      deliverer_(subscription.handler.url, subscription.handler.timeout) {}

Worker::~Worker() { Join(); }

void Worker::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::Run() {
  const auto batch = static_cast<size_t>(sub_.handler.batch_size);
  while (true) {
    loop_->Beat();
    auto work = dispatcher_->TakeWork(batch, Millis(1000));
    if (work.empty()) {
      if (dispatcher_->stopped()) break;
      continue;
    }
    if (batch == 1) {
      DeliverOne(work.front());
    } else {
      DeliverBatch(work);
    }
  }
  loop_->Retire();
}

void Worker::Count(const delivery::Decision& decision) {
  if (auto* counter = metrics_->Delivered(decision.outcome)) counter->Increment();
}

void Worker::HandlerRefused(const std::vector<HeldEntry*>& entries, const std::string& error) {
  const Millis pause = ReconnectDelay(refused_streak_++, Millis(100), Millis(2000), UnitRandom());
  // Reading pauses first: once the gauge says the handler is down, no new read starts.
  dispatcher_->HoldForHandler(entries, pause);
  metrics_->handler_up->Set(0);
  LogWarn("handler refused the connection; delivery paused, no attempt spent",
          {{"subscription", sub_.name},
           {"url", sub_.handler.url},
           {"error", error},
           {"retry_in_ms", static_cast<int64_t>(pause.count())}});
}

void Worker::HandlerAnswered() {
  if (refused_streak_ > 0 || dispatcher_->handler_paused()) {
    LogInfo("handler is answering again", {{"subscription", sub_.name}});
  }
  refused_streak_ = 0;
  metrics_->handler_up->Set(1);
  dispatcher_->HandlerAnswered();
}

void Worker::DeliverOne(HeldEntry* held) {
  std::string why;
  if (!delivery::EncodeEntry(context_, held->entry, &request_, &why)) {
    settler_->Submit({{held, delivery::Decision::Invalid(std::move(why))}});
    return;
  }
  const auto started = SteadyClock::now();
  delivery::HandlerResponse response = deliverer_.Post(request_);
  if (response.kind == delivery::HandlerResponse::Kind::kRefused) {
    HandlerRefused({held}, response.error);
    return;
  }
  metrics_->delivery_duration->Observe(
      std::chrono::duration<double>(SteadyClock::now() - started).count());
  HandlerAnswered();
  auto decision = delivery::Decide(policy_, response, held->entry.attempts,
                                   SystemClock::Instance().WallMillis(), UnitRandom());
  Count(decision);
  if (decision.action == delivery::Action::kAck) {
    // Accepted: free its room (and its ordering key) now; only the id waits for the XACK.
    // The settler knows the id before the entry stops being held: an own-PEL recovery never
    // sees it as lost in between.
    settler_->SubmitAcks({held->entry.id});
    dispatcher_->Release(held);
    return;
  }
  if (decision.action == delivery::Action::kRetry) {
    LogDebug("delivery failed; will retry",
             {{"subscription", sub_.name},
              {"id", held->entry.id},
              {"attempts", held->entry.attempts},
              {"status", decision.status_text},
              {"retry_in_ms", static_cast<int64_t>(decision.delay.count())}});
  }
  settler_->Submit({{held, std::move(decision)}});
}

void Worker::DeliverBatch(const std::vector<HeldEntry*>& entries) {
  std::vector<const StreamEntry*> batch;
  batch.reserve(entries.size());
  for (auto* held : entries) batch.push_back(&held->entry);
  if (std::string why; !delivery::EncodeBatch(context_, batch, &request_, &why)) {
    // A header would carry a control character (only configuration can cause it in batch mode):
    // nothing is sent, every entry is dead-lettered as invalid.
    std::vector<Outcome> invalid;
    invalid.reserve(entries.size());
    for (auto* held : entries) invalid.push_back({held, delivery::Decision::Invalid(why)});
    settler_->Submit(std::move(invalid));
    return;
  }
  const auto started = SteadyClock::now();
  delivery::HandlerResponse response = deliverer_.Post(request_);
  if (response.kind == delivery::HandlerResponse::Kind::kRefused) {
    HandlerRefused(entries, response.error);
    return;
  }
  metrics_->delivery_duration->Observe(
      std::chrono::duration<double>(SteadyClock::now() - started).count());
  HandlerAnswered();

  std::vector<delivery::BatchItem> items;
  items.reserve(entries.size());
  for (auto* held : entries) items.push_back({held->entry.id, held->entry.attempts});
  auto answer = delivery::DecideBatch(policy_, response, items,
                                      SystemClock::Instance().WallMillis(), UnitRandom);
  if (answer.unknown_ids > 0) {
    metrics_->batch_unknown_ids->Increment(static_cast<double>(answer.unknown_ids));
    LogWarn("batch answer named ids that were not in the batch; ignored",
            {{"subscription", sub_.name}, {"count", static_cast<int64_t>(answer.unknown_ids)}});
  }

  // Accepted entries are released at once and only their ids go on to be acknowledged.
  std::vector<Outcome> outcomes;
  std::vector<HeldEntry*> accepted;
  for (size_t i = 0; i < entries.size(); ++i) {
    delivery::Decision& decision = answer.decisions[i];
    Count(decision);
    if (decision.action == delivery::Action::kAck) {
      accepted.push_back(entries[i]);
    } else {
      outcomes.push_back({entries[i], std::move(decision)});
    }
  }
  if (!accepted.empty()) {
    std::vector<std::string> ids;
    ids.reserve(accepted.size());
    for (auto* held : accepted) ids.push_back(held->entry.id);
    settler_->SubmitAcks(std::move(ids));
    for (auto* held : accepted) dispatcher_->Release(held);
  }
  if (!outcomes.empty()) settler_->Submit(std::move(outcomes));
}

}  // namespace streamcar::consumer
