// The span per delivery attempt (telemetry/tracing_observer.h) on a manual clock, and the
// exporter's bounded queue (telemetry/span_exporter.h): parentage and sampling, the handler's
// traceparent, attributes, error status, batches, wall-clock times, a refused connection, and
// overflow counted. tests/tracing/tracing_test.py checks the same against the real binary and a
// real OTLP receiver.

#include "sidecar/telemetry/tracing_observer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "sidecar/telemetry/span_exporter.h"

namespace streamcar::telemetry {
namespace {

using runtime::EntryRef;
using Kind = delivery::HandlerResponse::Kind;

constexpr char kTrace[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kParent[] = "00f067aa0ba902b7";

class VectorSink final : public SpanSink {
 public:
  void Submit(Span span) override { spans.push_back(std::move(span)); }
  std::vector<Span> spans;
};

std::string Hex(const std::string& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

const SpanAttribute* Find(const Span& span, const std::string& key) {
  for (const auto& attribute : span.attributes) {
    if (attribute.key == key) return &attribute;
  }
  return nullptr;
}

class TracingObserverTest : public ::testing::Test {
 protected:
  TracingObserverTest() {
    sub_.stream = "orders";
    sub_.group = "billing";
    sub_.retry.max_attempts = 5;
  }

  static StreamEntry Entry(std::string id, std::string traceparent = "", int attempts = 1) {
    StreamEntry entry;
    entry.id = std::move(id);
    entry.attempts = attempts;
    if (!traceparent.empty()) entry.fields.emplace_back("traceparent", std::move(traceparent));
    entry.fields.emplace_back("k", "v");
    return entry;
  }
  static delivery::HandlerResponse Answer(Kind kind, int status) {
    delivery::HandlerResponse response;
    response.kind = kind;
    response.status = status;
    return response;
  }
  // One entry's attempt: started now, answered `took` later. Returns the request's headers.
  delivery::HttpRequest Attempt(TracingObserver& observer, const StreamEntry& entry,
                                const delivery::HandlerResponse& answer, Millis took = Millis(40)) {
    const std::vector<EntryRef> refs{{entry.id, 1}};
    const StreamEntry* entries[] = {&entry};
    delivery::HttpRequest request;
    if (const auto* tp = entry.Find("traceparent"))
      request.headers.emplace_back("traceparent", *tp);
    const SteadyTime started = clock_.Now();
    observer.OnStarted({refs, entries, &request}, started);
    clock_.Advance(took);
    observer.OnEnded(refs, answer, started, clock_.Now());
    return request;
  }
  static std::string Traceparent(const delivery::HttpRequest& request) {
    for (const auto& [name, value] : request.headers) {
      if (name == "traceparent") return value;
    }
    return "";
  }

  config::Subscription sub_;
  ManualClock clock_;
  VectorSink sink_;
};

TEST_F(TracingObserverTest, ASampledParentIsTheSpansParentAndTheHandlerGetsTheSpansOwnId) {
  TracingObserver observer(sub_, 0.0, &sink_, clock_);  // a sampled parent ignores the ratio
  const int64_t wall = clock_.WallMillis();
  auto request =
      Attempt(observer, Entry("1-0", std::string("00-") + kTrace + "-" + kParent + "-01"),
              Answer(Kind::kAnswered, 200));
  ASSERT_EQ(sink_.spans.size(), 1u);
  const Span& span = sink_.spans[0];
  EXPECT_EQ(Hex(span.trace_id), kTrace);
  EXPECT_EQ(Hex(span.parent_span_id), kParent);
  EXPECT_EQ(span.span_id.size(), 8u);
  EXPECT_EQ(Traceparent(request), std::string("00-") + kTrace + "-" + Hex(span.span_id) + "-01");
  EXPECT_EQ(span.name, "deliver orders");
  EXPECT_FALSE(span.error);
  EXPECT_EQ(span.start_unix_nano, static_cast<uint64_t>(wall) * 1'000'000);
  EXPECT_EQ(span.end_unix_nano - span.start_unix_nano, 40'000'000u) << "the steady duration";
  EXPECT_EQ(std::get<std::string>(Find(span, "messaging.system")->value), "redis");
  EXPECT_EQ(std::get<std::string>(Find(span, "messaging.destination.name")->value), "orders");
  EXPECT_EQ(std::get<std::string>(Find(span, "messaging.consumer.group.name")->value), "billing");
  EXPECT_EQ(std::get<std::string>(Find(span, "messaging.message.id")->value), "1-0");
  EXPECT_EQ(std::get<int64_t>(Find(span, "http.response.status_code")->value), 200);
  EXPECT_EQ(Find(span, "http.request.resend_count"), nullptr) << "a first attempt";
}

TEST_F(TracingObserverTest, AnUnsampledParentGetsNoSpanAndItsTraceparentGoesOnUnchanged) {
  TracingObserver observer(sub_, 1.0, &sink_, clock_);
  const std::string unsampled = std::string("00-") + kTrace + "-" + kParent + "-00";
  auto request = Attempt(observer, Entry("1-0", unsampled), Answer(Kind::kAnswered, 200));
  EXPECT_TRUE(sink_.spans.empty());
  EXPECT_EQ(Traceparent(request), unsampled);
}

TEST_F(TracingObserverTest, WithoutAParentTheRatioDecidesAndARecordedSpanStartsATrace) {
  TracingObserver never(sub_, 0.0, &sink_, clock_);
  auto unrecorded = Attempt(never, Entry("1-0"), Answer(Kind::kAnswered, 200));
  EXPECT_TRUE(sink_.spans.empty());
  EXPECT_EQ(Traceparent(unrecorded), "") << "nothing recorded, nothing added";
  TracingObserver always(sub_, 1.0, &sink_, clock_);
  auto recorded = Attempt(always, Entry("2-0", "00-not-a-valid-one"), Answer(Kind::kAnswered, 200));
  ASSERT_EQ(sink_.spans.size(), 1u);
  EXPECT_TRUE(sink_.spans[0].parent_span_id.empty()) << "an invalid traceparent is no parent";
  EXPECT_EQ(Traceparent(recorded),
            "00-" + Hex(sink_.spans[0].trace_id) + "-" + Hex(sink_.spans[0].span_id) + "-01");
  // About half of many traces at 0.5.
  TracingObserver half(sub_, 0.5, &sink_, clock_);
  sink_.spans.clear();
  for (int i = 0; i < 2000; ++i)
    Attempt(half, Entry(std::to_string(i) + "-0"), Answer(Kind::kAnswered, 200));
  EXPECT_GT(sink_.spans.size(), 850u);
  EXPECT_LT(sink_.spans.size(), 1150u);
}

TEST_F(TracingObserverTest, AFailedAttemptIsAnErrorWithItsOutcome) {
  TracingObserver observer(sub_, 1.0, &sink_, clock_);
  Attempt(observer, Entry("1-0", "", 3), Answer(Kind::kAnswered, 503));
  Attempt(observer, Entry("2-0"), Answer(Kind::kTimeout, 0));
  auto retry_body = Answer(Kind::kAnswered, 200);
  retry_body.body = R"({"status":"RETRY"})";
  Attempt(observer, Entry("3-0"), retry_body);
  ASSERT_EQ(sink_.spans.size(), 3u);
  EXPECT_TRUE(sink_.spans[0].error);
  EXPECT_EQ(std::get<std::string>(Find(sink_.spans[0], "error.type")->value), "retry");
  EXPECT_EQ(std::get<int64_t>(Find(sink_.spans[0], "http.request.resend_count")->value), 2);
  EXPECT_TRUE(sink_.spans[1].error);
  EXPECT_EQ(std::get<std::string>(Find(sink_.spans[1], "error.type")->value), "timeout");
  EXPECT_EQ(Find(sink_.spans[1], "http.response.status_code"), nullptr) << "no answer";
  EXPECT_TRUE(sink_.spans[2].error) << "a 2xx that asks for a retry is no success";
}

TEST_F(TracingObserverTest, ARefusedConnectionIsNoAttemptAndHasNoSpan) {
  TracingObserver observer(sub_, 1.0, &sink_, clock_);
  Attempt(observer, Entry("1-0"), Answer(Kind::kRefused, 0));
  EXPECT_TRUE(sink_.spans.empty());
}

TEST_F(TracingObserverTest, ABatchIsOneSpanLinkedToEachEntrysTrace) {
  TracingObserver observer(sub_, 0.0, &sink_, clock_);  // a sampled entry records the batch
  const StreamEntry a = Entry("1-0", std::string("00-") + kTrace + "-" + kParent + "-01");
  const StreamEntry b = Entry("2-0");
  const std::vector<EntryRef> refs{{"1-0", 1}, {"2-0", 1}};
  const StreamEntry* entries[] = {&a, &b};
  delivery::HttpRequest request;
  observer.OnStarted({refs, entries, &request}, clock_.Now());
  auto answer = Answer(Kind::kAnswered, 200);
  answer.body = R"({"failures":[{"id":"2-0","status":"RETRY"}]})";
  observer.OnEnded(refs, answer, clock_.Now(), clock_.Now());
  ASSERT_EQ(sink_.spans.size(), 1u);
  const Span& span = sink_.spans[0];
  EXPECT_TRUE(span.parent_span_id.empty());
  ASSERT_EQ(span.links.size(), 1u);
  EXPECT_EQ(Hex(span.links[0].trace_id), kTrace);
  EXPECT_EQ(Hex(span.links[0].span_id), kParent);
  EXPECT_EQ(std::get<int64_t>(Find(span, "messaging.batch.message_count")->value), 2);
  EXPECT_EQ(Find(span, "messaging.message.id"), nullptr);
  EXPECT_TRUE(span.error) << "an entry of the batch failed";
  EXPECT_EQ(Traceparent(request), "00-" + Hex(span.trace_id) + "-" + Hex(span.span_id) + "-01");
}

TEST(SpanExporterTest, AFullQueueDropsAndCountsWithoutWaiting) {
  std::atomic<size_t> dropped{0};
  ExporterOptions options;
  options.endpoint = "http://127.0.0.1:9/v1/traces";  // discard: nothing answers
  options.service_name = "test";
  options.queue_capacity = 4;
  options.max_batch = 1000;  // never full: the thread waits for its interval
  options.interval = Millis(60'000);
  options.dropped = [&dropped](size_t count) { dropped += count; };
  SpanExporter exporter(options);
  const auto started = SteadyClock::now();
  for (int i = 0; i < 10; ++i) exporter.Submit(Span{});
  EXPECT_LT(SteadyClock::now() - started, Millis(100)) << "Submit never waits";
  EXPECT_EQ(dropped.load(), 6u);
  exporter.Shutdown(SteadyClock::now());  // no time left: the queued four are dropped too
  EXPECT_EQ(dropped.load(), 10u);
}

}  // namespace
}  // namespace streamcar::telemetry
