// The delivery pump (runtime/delivery_pump.h) over a fake handler client, on a manual clock:
// what it sends, and for one shard of a sharded subscription, that no request starts once the
// member's local lease has run out (SHARDING.md B6: checked before each POST).

#include "sidecar/runtime/delivery_pump.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <string>
#include <vector>

#include "sidecar/redis/stream_ops.h"
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

// The pump and its collaborators, put together as the subscription loop does
// (runtime/subscription_loop.cc, Core).
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

  explicit DeliveryPumpTest(const std::string& key_field = "") : sub_(Sub(key_field)) {}

  // One shard of a sharded subscription, as the loop makes it: one lane without key_field.
  void Shard(std::function<bool()> lease_valid) {
    if (sub_.ordering.key_field.empty()) ledger_.OrderAllInOneLane();
    pump_.ShardedBy({3, 1742}, std::move(lease_valid));
  }

  config::Subscription sub_;
  ManualClock clock_;
  redis::PlainOps ops_{sub_.stream, sub_.group, "c1"};
  EntryLedger ledger_{100, sub_.ordering.key_field};
  admin::Metrics registry_;
  admin::SubscriptionMetrics& metrics_ = registry_.ForSubscription(sub_.name);
  Settlement settlement_{sub_, ops_, &ledger_, &metrics_, clock_};
  FakeHandlerClient client_{static_cast<size_t>(sub_.handler.concurrency)};
  int after_results_ = 0;
  DeliveryPump pump_{
      sub_, &ledger_, &settlement_, &client_, &metrics_, clock_, [this] { ++after_results_; }};
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

// A shard ordered by key has a lane per key, so one Pump may send several requests: the lease is
// asked before each of them, not once per Pump.
class KeyedShardPumpTest : public DeliveryPumpTest {
 protected:
  KeyedShardPumpTest() : DeliveryPumpTest("k") {}
};

TEST_F(KeyedShardPumpTest, TheLeaseIsCheckedBeforeEachPost) {
  int checks_left_valid = 2;
  Shard([&] { return checks_left_valid-- > 0; });
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
