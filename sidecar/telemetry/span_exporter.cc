#include "sidecar/telemetry/span_exporter.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "sidecar/common/log.h"
#include "sidecar/config/redis_url.h"
#include "sidecar/telemetry/otlp_post.h"
#include "sidecar/telemetry/otlp_proto.h"

namespace streamcar::telemetry {
namespace {

// OTLP/HTTP's retryable answers (the specification's "Retryable Response Codes").
bool Retryable(int status) {
  return status == 429 || status == 502 || status == 503 || status == 504;
}

}  // namespace

SpanExporter::SpanExporter(ExporterOptions options)
    : options_(std::move(options)), target_(delivery::SplitUrl(options_.endpoint)) {
  thread_ = std::thread([this] { Run(); });
}

SpanExporter::~SpanExporter() { Shutdown(SteadyClock::now()); }

void SpanExporter::Submit(Span span) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_ && queue_.size() < options_.queue_capacity) {
      queue_.push_back(std::move(span));
      if (queue_.size() >= options_.max_batch) wake_.notify_one();
      return;
    }
  }
  if (options_.dropped) options_.dropped(1);
}

void SpanExporter::Shutdown(SteadyTime deadline) {
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    if (!stopping_) {
      stopping_ = true;
      stop_deadline_ = deadline;
    }
  }
  wake_.notify_one();
  thread_.join();
}

void SpanExporter::Run() {
  for (;;) {
    std::vector<Span> batch;
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, options_.interval,
                     [this] { return stopping_ || queue_.size() >= options_.max_batch; });
      if (stopping_ && (queue_.empty() || SteadyClock::now() >= stop_deadline_)) {
        const size_t left = queue_.size();
        queue_.clear();
        lock.unlock();
        if (left > 0 && options_.dropped) options_.dropped(left);
        return;
      }
      const size_t take = std::min(queue_.size(), options_.max_batch);
      batch.reserve(take);
      for (size_t i = 0; i < take; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    if (batch.empty()) continue;
    if (!Export(batch) && options_.dropped) options_.dropped(batch.size());
  }
}

SteadyTime SpanExporter::Deadline() {
  std::lock_guard lock(mutex_);
  return stopping_ ? stop_deadline_ : SteadyTime::max();
}

bool SpanExporter::Export(const std::vector<Span>& batch) {
  const std::string body = EncodeExportRequest(options_.service_name, options_.version, batch);
  Millis backoff = options_.retry_backoff;
  std::string failure = "no time left before shutdown's deadline";
  for (int attempt = 1; attempt <= options_.max_tries; ++attempt) {
    // Shutdown may have set a deadline since the last try: no try starts or lasts past it (a
    // POST already under way when shutdown began ends within its own export_timeout).
    const SteadyTime deadline = Deadline();
    if (SteadyClock::now() >= deadline) break;
    auto answer =
        PostExport(target_, body, std::min(deadline, SteadyClock::now() + options_.export_timeout));
    if (answer.ok() && *answer >= 200 && *answer <= 299) return true;
    failure = answer.ok() ? "HTTP " + std::to_string(*answer) : answer.status().message();
    if (answer.ok() && !Retryable(*answer)) break;
    if (attempt == options_.max_tries) break;
    std::unique_lock lock(mutex_);
    // Shutdown cuts a retry wait short once its deadline has passed.
    if (wake_.wait_for(lock, backoff,
                       [this] { return stopping_ && SteadyClock::now() >= stop_deadline_; })) {
      break;
    }
    backoff *= 2;
  }
  // One warning per half minute: an unreachable collector must not flood the log.
  const SteadyTime now = SteadyClock::now();
  if (now < next_warning_) return false;
  next_warning_ = now + std::chrono::seconds(30);
  LogWarn("span export failed; the batch is dropped (warned at most every 30 s)",
          {{"endpoint", config::MaskUrlPassword(target_.origin + target_.path)},
           {"spans", static_cast<int64_t>(batch.size())},
           {"error", failure}});
  return false;
}

}  // namespace streamcar::telemetry
