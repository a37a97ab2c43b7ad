// The delivery pump (runtime/delivery_pump.h) over a fake handler client, on a manual clock:
// what it sends, how many at once, the delivery gates (closing, opening, learning from answers,
// the ledger's pause), and for one shard of a sharded subscription, that no request starts once
// the member's local lease has run out (SHARDING.md B6: checked before each POST).

#include "sidecar/runtime/delivery_pump.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <string>
#include <vector>

#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/metrics_observer.h"
#include "sidecar/runtime/refused_connect_gate.h"
#include "tests/support/fake_handler_client.h"

namespace streamcar::runtime {
namespace {

using streamcar::testing::FakeHandlerClient;

StreamEntry Entry(const std::string& id, const std::string& key = "a") {
  StreamEntry e;
  e.id = id;
  e.fields.push_back({"k", key});
  e.attempts = 1;
  return e;
}

// A gate the test opens and closes; it counts how often it was asked.
class SwitchGate final : public DeliveryGate {
 public:
  explicit SwitchGate(std::function<bool()> open) : open_(std::move(open)) {}
  std::string_view name() const override { return "switch"; }
  GateState StateAt(SteadyTime /*now*/) const override {
    ++asked_;
    if (open_()) return GateState::Open();
    return GateState::ClosedUntil(std::nullopt, GateState::Reads::kGoOn);
  }
  int asked() const { return asked_; }

 private:
  std::function<bool()> open_;
  mutable int asked_ = 0;
};

// The pump and its collaborators, put together as the subscription loop does
// (runtime/subscription_loop.cc, Core): a plain loop's gates are the refused-connect one (and
// the health one with a health_url); a shard's loop adds its lease's.
class DeliveryPumpTest : public ::testing::Test {
 protected:
  static config::Subscription Sub(const std::string& key_field = "") {
    config::Subscription sub;
    sub.name = "orders:{3}/billing";
    sub.stream = "orders:{3}";
    sub.group = "billing";
    sub.dead_letter.stream = "orders:{3}:dlq";
    sub.handler.url = "http://127.0.0.1:1/";
    sub.handler.concurrency = 4;
    sub.ordering.key_field = key_field;
    return sub;
  }

  explicit DeliveryPumpTest(const std::string& key_field = "") : sub_(Sub(key_field)) {
    auto refused = std::make_unique<RefusedConnectGate>(sub_.name, sub_.handler.url);
    refused_ = refused.get();
    gates_.Add(std::move(refused));
  }

  // One shard of a sharded subscription, as the loop makes it: one lane without key_field, and
  // a gate for the member's lease (here one the test switches).
  void Shard(std::function<bool()> lease_valid) {
    if (sub_.ordering.key_field.empty()) ledger_.OrderAllInOneLane();
    auto lease = std::make_unique<SwitchGate>(std::move(lease_valid));
    lease_ = lease.get();
    gates_.Add(std::move(lease));
    pump_.ShardedBy({3, 1742});
  }

  static delivery::HandlerResponse Refused() {
    delivery::HandlerResponse response;
    response.kind = delivery::HandlerResponse::Kind::kRefused;
    response.error = "connection refused";
    return response;
  }

  config::Subscription sub_;
  ManualClock clock_;
  redis::PlainOps ops_{sub_.stream, sub_.group, "c1"};
  EntryLedger ledger_{100, sub_.ordering.key_field};
  admin::Metrics registry_;
  admin::SubscriptionMetrics& metrics_ = registry_.ForSubscription(sub_.name);
  MetricsObserver observer_{&metrics_};
  Settlement settlement_{sub_, ops_, &ledger_, &observer_, clock_};
  FakeHandlerClient client_{static_cast<size_t>(sub_.handler.concurrency)};
  DeliveryGates gates_;
  RefusedConnectGate* refused_ = nullptr;
  SwitchGate* lease_ = nullptr;
  int after_results_ = 0;
  DeliveryPump pump_{sub_,    &ledger_,   &settlement_, &client_,
                     &gates_, &observer_, clock_,       [this] { ++after_results_; }};
};

TEST_F(DeliveryPumpTest, SendsWhatIsReadyAndSettlesTheAnswer) {
  ASSERT_EQ(ledger_.Admit({Entry("1-0"), Entry("2-0")}), 2u);
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 2u) << "a plain subscription: one request per free slot";
  EXPECT_EQ(client_.Header(0, "Streamcar-Id"), "1-0");
  EXPECT_EQ(client_.Header(0, "Streamcar-Shard"), "<absent>");
  EXPECT_EQ(client_.sent()[0].timeout, sub_.handler.timeout);
  client_.AnswerStatus(0, 200);
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kAcking);
  EXPECT_EQ(settlement_.queued_acks(), 1u);
  EXPECT_EQ(after_results_, 1);
  EXPECT_EQ(ledger_.StateOf("2-0"), EntryState::kInFlight);
}

// SHARDING.md B6: a member whose local lease ran out sends nothing, though entries are ready and
// the handler has room; they stay queued, and go out once the lease is valid again.
TEST_F(DeliveryPumpTest, AShardWhoseLocalLeaseRanOutSendsNothing) {
  bool lease_valid = false;
  Shard([&] { return lease_valid; });
  ASSERT_EQ(ledger_.Admit({Entry("1-0"), Entry("2-0"), Entry("3-0")}), 3u);
  pump_.Pump();
  EXPECT_TRUE(client_.sent().empty()) << "a POST after the local lease deadline";
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kQueued);

  lease_valid = true;
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 1u) << "one shard, one lane: one request in flight";
  EXPECT_EQ(client_.Header(0, "Streamcar-Id"), "1-0");
  EXPECT_EQ(client_.Header(0, "Streamcar-Shard"), "3");
  EXPECT_EQ(client_.Header(0, "Streamcar-Fence"), "1742");
  EXPECT_EQ(client_.Header(0, "Idempotency-Key"), "orders:{3}/1-0");

  // The lease runs out while a request is in flight: its answer is applied, nothing follows it.
  lease_valid = false;
  client_.AnswerStatus(0, 200);
  pump_.Pump();
  EXPECT_EQ(client_.sent().size(), 1u);
  EXPECT_EQ(ledger_.StateOf("2-0"), EntryState::kQueued);
}

// handler.concurrency bounds the requests out at once; an answer frees its slot for the next.
TEST_F(DeliveryPumpTest, SendsNoMoreThanTheHandlerConcurrencyAtOnce) {
  std::vector<StreamEntry> entries;
  for (int i = 1; i <= 6; ++i) entries.push_back(Entry(std::to_string(i) + "-0"));
  ASSERT_EQ(ledger_.Admit(std::move(entries)), 6u);
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 4u);
  EXPECT_EQ(client_.outstanding(), 4u);
  pump_.Pump();
  EXPECT_EQ(client_.sent().size(), 4u) << "no free slot, nothing more";
  client_.AnswerStatus(2, 200);
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 5u);
  EXPECT_EQ(client_.Header(4, "Streamcar-Id"), "5-0") << "in queue order";
  EXPECT_EQ(metrics_.Delivered(delivery::DeliveryOutcome::kSuccess)->Value(), 1);
}

// SPEC 3.2: a refused connection is not an attempt. The entries go back to the front, the
// refused-connect gate closes for its backoff (the ledger's pause with it, which stops reads),
// and the first answer afterwards opens it and lets reading go on.
TEST_F(DeliveryPumpTest, ARefusedConnectionClosesTheGateUntilItsPauseEnds) {
  ASSERT_EQ(ledger_.Admit({Entry("1-0"), Entry("2-0")}), 2u);
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 2u);
  client_.Answer(0, Refused());
  EXPECT_EQ(after_results_, 1);
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kQueued) << "handed back, no attempt spent";
  EXPECT_EQ(metrics_.handler_up->Value(), 0);
  EXPECT_FALSE(gates_.Open(clock_.Now()));
  EXPECT_TRUE(ledger_.DeliveryPaused(clock_.Now()));
  EXPECT_TRUE(ledger_.ReadPaused(clock_.Now()));
  const auto ends = ledger_.PauseEndsAt();
  ASSERT_TRUE(ends.has_value());
  EXPECT_GT(*ends, clock_.Now());
  EXPECT_LE(*ends, clock_.Now() + RefusedConnectGate::kFirstPause);

  pump_.Pump();
  EXPECT_EQ(client_.sent().size(), 2u) << "a POST while the gate is closed";
  clock_.Advance(RefusedConnectGate::kFirstPause);
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 3u) << "the pause ended by itself";
  EXPECT_EQ(client_.Header(2, "Streamcar-Id"), "1-0");
  EXPECT_TRUE(ledger_.ReadPaused(clock_.Now())) << "no reads before the handler answers";

  client_.AnswerStatus(2, 200);
  EXPECT_TRUE(gates_.Open(clock_.Now()));
  EXPECT_FALSE(ledger_.ReadPaused(clock_.Now()));
  EXPECT_EQ(metrics_.handler_up->Value(), 1);
  EXPECT_EQ(ledger_.StateOf("1-0"), EntryState::kAcking);
  EXPECT_EQ(metrics_.Delivered(delivery::DeliveryOutcome::kSuccess)->Value(), 1);
}

// Every gate is asked before each POST; one closed gate is enough to hold delivery back, and
// opening it lets the queue go in order.
TEST_F(DeliveryPumpTest, AClosedGateHoldsDeliveryUntilItOpens) {
  bool open = false;
  auto gate = std::make_unique<SwitchGate>([&] { return open; });
  SwitchGate* sw = gate.get();
  gates_.Add(std::move(gate));
  ASSERT_EQ(ledger_.Admit({Entry("1-0"), Entry("2-0")}), 2u);
  pump_.Pump();
  EXPECT_TRUE(client_.sent().empty());
  EXPECT_FALSE(ledger_.ReadPaused(clock_.Now())) << "this gate lets reading go on";
  open = true;
  const int asked = sw->asked();
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 2u);
  EXPECT_GE(sw->asked() - asked, 2) << "asked before each POST";
  EXPECT_EQ(client_.Header(0, "Streamcar-Id"), "1-0");
  EXPECT_EQ(client_.Header(1, "Streamcar-Id"), "2-0");
}

// A shard ordered by key has a lane per key, so one Pump may send several requests: the lease is
// asked before each of them, not once per Pump.
class KeyedShardPumpTest : public DeliveryPumpTest {
 protected:
  KeyedShardPumpTest() : DeliveryPumpTest("k") {}
};

TEST_F(KeyedShardPumpTest, TheLeaseIsCheckedBeforeEachPost) {
  // The lease runs out once two requests went out: asked only once per Pump, it would let all
  // four go.
  Shard([&] { return client_.sent().size() < 2; });
  ASSERT_EQ(
      ledger_.Admit({Entry("1-0", "a"), Entry("2-0", "b"), Entry("3-0", "c"), Entry("4-0", "d")}),
      4u);
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 2u) << "the lease ran out after two POSTs";
  EXPECT_EQ(client_.Header(0, "Streamcar-Id"), "1-0");
  EXPECT_EQ(client_.Header(1, "Streamcar-Id"), "2-0");
  EXPECT_EQ(ledger_.StateOf("3-0"), EntryState::kQueued);
  EXPECT_EQ(ledger_.StateOf("4-0"), EntryState::kQueued);
}

}  // namespace
}  // namespace streamcar::runtime
