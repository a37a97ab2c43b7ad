#include "sidecar/telemetry/tracing_observer.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>

#include "sidecar/delivery/entry_trace.h"

namespace streamcar::telemetry {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string ToHex(const std::string& bytes) {
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char byte : bytes) {
    hex.push_back(kHex[byte >> 4]);
    hex.push_back(kHex[byte & 0x0f]);
  }
  return hex;
}

int HexDigit(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

std::string FromHex(std::string_view hex) {
  std::string bytes(hex.size() / 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<char>((HexDigit(hex[2 * i]) << 4) | HexDigit(hex[2 * i + 1]));
  }
  return bytes;
}

// The trace an entry's delivery continues, when it has one: the rule the encoder forwards by
// (delivery/entry_trace.h: the entry's traceparent field, or a Dapr-published event's), so the
// span's parent is what the handler would have received. "00-<trace 32>-<parent 16>-<flags 2>".
struct Parent {
  std::string trace_id;  // bytes
  std::string span_id;   // bytes
  bool sampled = false;
};

std::optional<Parent> ParentOf(const config::HandlerConfig& handler, const StreamEntry& entry) {
  const std::optional<delivery::TraceContext> trace = delivery::EntryTrace(handler, entry);
  if (!trace) return std::nullopt;
  const std::string_view text(trace->traceparent);
  return Parent{FromHex(text.substr(3, 32)), FromHex(text.substr(36, 16)),
                (HexDigit(text[54]) & 1) != 0};
}

// The request's traceparent header becomes the span's: the handler's spans nest under it.
void SetTraceparent(delivery::HttpRequest* request, const Span& span) {
  std::string value = "00-" + ToHex(span.trace_id) + "-" + ToHex(span.span_id) + "-01";
  for (auto& [name, header] : request->headers) {
    if (name == "traceparent") {
      header = std::move(value);
      return;
    }
  }
  request->headers.emplace_back("traceparent", std::move(value));
}

}  // namespace

TracingObserver::TracingObserver(const config::Subscription& subscription, double sample_ratio,
                                 SpanSink* sink, const Clock& clock)
    : sub_(subscription),
      sample_ratio_(sample_ratio),
      sink_(sink),
      clock_(clock),
      policy_(delivery::OutcomePolicyOf(subscription)),
      name_("deliver " + subscription.stream),
      random_(std::random_device{}()),
      anchor_steady_(clock.Now()),
      anchor_wall_ms_(clock.WallMillis()) {}

bool TracingObserver::Sampled(const std::string& trace_id) const {
  if (sample_ratio_ >= 1.0) return true;
  if (sample_ratio_ <= 0.0) return false;
  // The trace id's last 8 bytes as a number below ratio x 2^64, as TraceIdRatioBased does: every
  // participant that samples by ratio keeps the same traces.
  uint64_t low = 0;
  for (size_t i = 8; i < 16; ++i) low = (low << 8) | static_cast<unsigned char>(trace_id[i]);
  return static_cast<double>(low) <
         sample_ratio_ * static_cast<double>(std::numeric_limits<uint64_t>::max());
}

std::string TracingObserver::RandomBytes(size_t count) {
  std::string bytes(count, '\0');
  do {
    for (size_t i = 0; i < count; i += 8) {
      uint64_t word = random_();
      for (size_t j = i; j < count && j < i + 8; ++j, word >>= 8) {
        bytes[j] = static_cast<char>(word & 0xff);
      }
    }
  } while (bytes.find_first_not_of('\0') == std::string::npos);  // an all-zero id is invalid
  return bytes;
}

uint64_t TracingObserver::UnixNanos(SteadyTime at) {
  using std::chrono::duration_cast;
  using std::chrono::nanoseconds;
  const int64_t wall_ms = clock_.WallMillis();
  const int64_t mapped_ms =
      anchor_wall_ms_ + duration_cast<Millis>(clock_.Now() - anchor_steady_).count();
  if (std::llabs(mapped_ms - wall_ms) > 2) {  // the wall clock was stepped
    anchor_steady_ = clock_.Now();
    anchor_wall_ms_ = wall_ms;
  }
  const int64_t nanos =
      anchor_wall_ms_ * 1'000'000 + duration_cast<nanoseconds>(at - anchor_steady_).count();
  return nanos < 0 ? 0 : static_cast<uint64_t>(nanos);
}

std::string TracingObserver::Key(const runtime::EntryRef& ref) {
  return ref.id + "#" + std::to_string(ref.generation);
}

void TracingObserver::OnStarted(const runtime::OutgoingRequest& outgoing, SteadyTime now) {
  if (outgoing.refs.empty() || outgoing.request == nullptr) return;
  OpenSpan open;
  Span& span = open.span;
  if (outgoing.entries.size() == 1) {
    const StreamEntry& entry = *outgoing.entries.front();
    if (auto parent = ParentOf(sub_.handler, entry)) {
      if (!parent->sampled) return;  // the producer chose not to record: neither do we
      span.trace_id = std::move(parent->trace_id);
      span.parent_span_id = std::move(parent->span_id);
    } else {
      span.trace_id = RandomBytes(16);
      if (!Sampled(span.trace_id)) return;
    }
    span.attributes.push_back({"messaging.message.id", entry.id});
    if (entry.attempts > 1) {
      span.attributes.push_back({"http.request.resend_count", int64_t{entry.attempts - 1}});
    }
    open.ids.push_back(entry.id);
    open.items.push_back({open.ids.back(), entry.attempts});
  } else {
    bool any_sampled = false;
    open.ids.reserve(outgoing.entries.size());
    for (const StreamEntry* entry : outgoing.entries) {
      if (entry == nullptr) continue;
      if (auto parent = ParentOf(sub_.handler, *entry)) {
        any_sampled = any_sampled || parent->sampled;
        span.links.push_back({std::move(parent->trace_id), std::move(parent->span_id)});
      }
      open.ids.push_back(entry->id);
    }
    for (size_t i = 0, j = 0; i < outgoing.entries.size(); ++i) {
      if (outgoing.entries[i] != nullptr)
        open.items.push_back({open.ids[j++], outgoing.entries[i]->attempts});
    }
    span.trace_id = RandomBytes(16);
    if (!any_sampled && !Sampled(span.trace_id)) return;
    span.attributes.push_back(
        {"messaging.batch.message_count", static_cast<int64_t>(open.items.size())});
  }
  span.span_id = RandomBytes(8);
  span.name = name_;
  span.start_unix_nano = UnixNanos(now);
  span.attributes.push_back({"messaging.system", std::string("redis")});
  span.attributes.push_back({"messaging.operation.type", std::string("process")});
  span.attributes.push_back({"messaging.destination.name", sub_.stream});
  span.attributes.push_back({"messaging.consumer.group.name", sub_.group});
  SetTraceparent(outgoing.request, span);
  open_[Key(outgoing.refs.front())] = std::move(open);
}

void TracingObserver::OnEnded(std::span<const runtime::EntryRef> refs,
                              const delivery::HandlerResponse& response, SteadyTime /*started*/,
                              SteadyTime now) {
  if (refs.empty()) return;
  auto found = open_.find(Key(refs.front()));
  if (found == open_.end()) return;  // not recorded
  OpenSpan open = std::move(found->second);
  open_.erase(found);
  using Kind = delivery::HandlerResponse::Kind;
  if (response.kind == Kind::kRefused) return;  // not an attempt (SPEC 3.2): no span
  Span& span = open.span;
  span.end_unix_nano = std::max(span.start_unix_nano, UnixNanos(now));
  if (response.kind == Kind::kAnswered) {
    span.attributes.push_back({"http.response.status_code", int64_t{response.status}});
  }
  // What the answer means for the entries, decided as the pump decides it (delivery/outcome.h):
  // any entry that did not succeed makes the span an error, its outcome the error.type.
  const int64_t now_ms = clock_.WallMillis();
  std::vector<delivery::Decision> decisions;
  if (open.items.size() == 1 && refs.size() == 1) {
    decisions.push_back(
        delivery::Decide(policy_, response, open.items.front().attempts, now_ms, 0.5));
  } else {
    decisions =
        delivery::DecideBatch(policy_, response, open.items, now_ms, [] { return 0.5; }).decisions;
  }
  for (const auto& decision : decisions) {
    if (decision.outcome == delivery::DeliveryOutcome::kSuccess) continue;
    span.error = true;
    span.attributes.push_back({"error.type", std::string(delivery::Name(decision.outcome))});
    span.status_message = decision.error.substr(0, 256);
    break;
  }
  sink_->Submit(std::move(span));
}

}  // namespace streamcar::telemetry
