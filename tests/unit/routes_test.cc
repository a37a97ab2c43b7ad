// SPEC 11 routes and filters without sockets: which target an entry goes to (delivery/routes.h),
// how a hand-out becomes requests, and the delivery pump applying it over a fake handler client
// (runtime/delivery_pump.h): drops acknowledged without a delivery, a batch split per target,
// requests without a free connection handed back, a shard's lane kept in order, and the
// streamcar_routed_total / streamcar_filtered_total series.

#include "sidecar/delivery/routes.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <string>
#include <vector>

#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/delivery_pump.h"
#include "sidecar/runtime/metrics_observer.h"
#include "sidecar/runtime/refused_connect_gate.h"
#include "tests/support/fake_handler_client.h"

namespace streamcar {
namespace {

using delivery::PlanRoutes;
using delivery::RouteChoice;
using delivery::RoutePlan;
using delivery::RouteTable;

config::RouteConfig Equals(std::string field, std::string text, std::string url) {
  config::RouteConfig route;
  route.field = std::move(field);
  route.equals = std::move(text);
  route.url = std::move(url);
  return route;
}

config::RouteConfig Prefix(std::string field, std::string text, std::string url) {
  config::RouteConfig route;
  route.field = std::move(field);
  route.prefix = std::move(text);
  route.url = std::move(url);
  return route;
}

config::RouteConfig Drop(std::string field, std::string text) {
  config::RouteConfig route;
  route.field = std::move(field);
  route.equals = std::move(text);
  route.drop = true;
  return route;
}

StreamEntry Entry(const std::string& id, std::vector<std::pair<std::string, std::string>> fields) {
  StreamEntry e;
  e.id = id;
  e.fields = std::move(fields);
  return e;
}

config::Subscription WithRoutes() {
  config::Subscription sub;
  sub.name = "orders/billing";
  sub.stream = "orders";
  sub.group = "billing";
  sub.dead_letter.stream = "orders:dlq";
  sub.handler.url = "http://127.0.0.1:1/all";
  sub.handler.concurrency = 4;
  sub.routes = {Equals("type", "order.created", "http://127.0.0.1:1/created"),
                Prefix("type", "order.", "http://127.0.0.1:1/orders"), Drop("type", "heartbeat"),
                Equals("region", "eu", "http://127.0.0.1:1/created")};
  return sub;
}

TEST(RouteTable, FirstMatchWinsAndNoMatchIsTheHandlerUrl) {
  const RouteTable table(WithRoutes());
  ASSERT_TRUE(table.active());
  // Distinct urls only: the fourth route shares the first one's target.
  EXPECT_EQ(table.targets(),
            (std::vector<std::string>{"http://127.0.0.1:1/all", "http://127.0.0.1:1/created",
                                      "http://127.0.0.1:1/orders"}));
  const auto choose = [&](std::vector<std::pair<std::string, std::string>> fields) {
    return table.Choose(Entry("1-0", std::move(fields)));
  };
  RouteChoice created = choose({{"type", "order.created"}});
  EXPECT_EQ(created.route, 0);
  EXPECT_EQ(created.target, 1u);
  EXPECT_FALSE(created.drop);
  RouteChoice paid = choose({{"type", "order.paid"}});
  EXPECT_EQ(paid.route, 1);
  EXPECT_EQ(paid.target, 2u);
  RouteChoice heartbeat = choose({{"type", "heartbeat"}});
  EXPECT_EQ(heartbeat.route, 2);
  EXPECT_TRUE(heartbeat.drop);
  RouteChoice eu = choose({{"type", "invoice"}, {"region", "eu"}});
  EXPECT_EQ(eu.route, 3);
  EXPECT_EQ(eu.target, 1u);
  RouteChoice none = choose({{"type", "invoice"}});
  EXPECT_EQ(none.route, -1);
  EXPECT_EQ(none.target, 0u);
  EXPECT_FALSE(none.drop);
}

TEST(RouteTable, MissingFieldBinaryValueAndLaterRepeatsDoNotMatch) {
  const RouteTable table(WithRoutes());
  // No "type" field at all.
  EXPECT_EQ(table.Choose(Entry("1-0", {{"kind", "order.created"}})).route, -1);
  // Not UTF-8: never matches, even by prefix.
  EXPECT_EQ(table.Choose(Entry("1-0", {{"type", std::string("order.\xff\xfe")}})).route, -1);
  // A repeated field is matched by its first value only.
  EXPECT_EQ(table.Choose(Entry("1-0", {{"type", "invoice"}, {"type", "order.created"}})).route, -1);
  // Equality is exact: case and a trailing byte matter.
  EXPECT_EQ(table.Choose(Entry("1-0", {{"type", "order.created "}})).route, 1);  // prefix
  EXPECT_EQ(table.Choose(Entry("1-0", {{"type", "Order.created"}})).route, -1);
  // An empty prefix matches any value of the field (the field is there).
  config::Subscription any = WithRoutes();
  any.routes = {Prefix("tenant", "", "http://127.0.0.1:1/tenants")};
  EXPECT_EQ(RouteTable(any).Choose(Entry("1-0", {{"tenant", ""}})).route, 0);
  EXPECT_EQ(RouteTable(any).Choose(Entry("1-0", {{"other", ""}})).route, -1);
}

TEST(RouteTable, WithoutRoutesEverythingGoesToTheHandlerUrl) {
  config::Subscription plain = WithRoutes();
  plain.routes.clear();
  const RouteTable table(plain);
  EXPECT_FALSE(table.active());
  EXPECT_EQ(table.targets(), std::vector<std::string>{"http://127.0.0.1:1/all"});
  EXPECT_EQ(delivery::RouteLabel(-1), "default");
  EXPECT_EQ(delivery::RouteLabel(2), "2");
}

RouteChoice To(size_t target) { return RouteChoice{false, target, static_cast<int>(target)}; }
RouteChoice Dropped() { return RouteChoice{true, 0, 9}; }

TEST(PlanRoutes, GroupsByTargetAndDropsTheFiltered) {
  const std::vector<RouteChoice> choices = {To(1), To(0), Dropped(), To(1), To(2), Dropped()};
  const RoutePlan plan = PlanRoutes(choices, /*in_order=*/false);
  EXPECT_EQ(plan.planned, choices.size());
  EXPECT_EQ(plan.dropped, (std::vector<size_t>{2, 5}));
  ASSERT_EQ(plan.requests.size(), 3u);
  EXPECT_EQ(plan.requests[0].target, 1u);
  EXPECT_EQ(plan.requests[0].items, (std::vector<size_t>{0, 3}));
  EXPECT_EQ(plan.requests[1].target, 0u);
  EXPECT_EQ(plan.requests[1].items, (std::vector<size_t>{1}));
  EXPECT_EQ(plan.requests[2].target, 2u);
  EXPECT_EQ(plan.requests[2].items, (std::vector<size_t>{4}));
}

TEST(PlanRoutes, InOrderOnlyTheLeadingRunWithOneFate) {
  const std::vector<RouteChoice> choices = {To(1), To(1), To(0), To(1)};
  RoutePlan plan = PlanRoutes(choices, /*in_order=*/true);
  EXPECT_EQ(plan.planned, 2u);
  ASSERT_EQ(plan.requests.size(), 1u);
  EXPECT_EQ(plan.requests[0].items, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(plan.dropped.empty());

  const std::vector<RouteChoice> drops_first = {Dropped(), Dropped(), To(0)};
  plan = PlanRoutes(drops_first, /*in_order=*/true);
  EXPECT_EQ(plan.planned, 2u);
  EXPECT_EQ(plan.dropped, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(plan.requests.empty());
}

// The pump with routes, put together as the subscription loop does (see delivery_pump_test.cc).
class RoutedPumpTest : public ::testing::Test {
 protected:
  explicit RoutedPumpTest(int batch_size = 1) : sub_(Sub(batch_size)) {
    gates_.Add(std::make_unique<runtime::RefusedConnectGate>(sub_.name, sub_.handler.url));
    registry_.DeclareRoutes(sub_.name, {true, true, false, true});
  }
  static config::Subscription Sub(int batch_size) {
    config::Subscription sub = WithRoutes();
    sub.handler.batch_size = batch_size;
    return sub;
  }
  double Routed(const std::string& route) const {
    const int index = route == "default" ? -1 : std::stoi(route);
    return metrics_.routed.at(static_cast<size_t>(index + 1))->Value();
  }
  size_t TargetOf(size_t sent) const { return client_.sent().at(sent).request.target; }

  config::Subscription sub_;
  ManualClock clock_;
  redis::PlainOps ops_{sub_.stream, sub_.group, "c1"};
  runtime::EntryLedger ledger_{100, ""};
  admin::Metrics registry_;
  admin::SubscriptionMetrics& metrics_ = registry_.ForSubscription(sub_.name);
  runtime::MetricsObserver observer_{&metrics_};
  runtime::Settlement settlement_{sub_, ops_, &ledger_, &observer_, clock_};
  testing::FakeHandlerClient client_{static_cast<size_t>(sub_.handler.concurrency)};
  runtime::DeliveryGates gates_;
  int after_results_ = 0;
  runtime::DeliveryPump pump_{sub_,    &ledger_,   &settlement_, &client_,
                              &gates_, &observer_, clock_,       [this] { ++after_results_; }};
};

TEST_F(RoutedPumpTest, EachEntryGoesToItsRouteAndDropsAreAcknowledgedUnsent) {
  ASSERT_EQ(ledger_.Admit({Entry("1-0", {{"type", "heartbeat"}}),
                           Entry("2-0", {{"type", "order.created"}}),
                           Entry("3-0", {{"type", "order.paid"}}), Entry("4-0", {{"type", "x"}}),
                           Entry("5-0", {{"type", "heartbeat"}})}),
            5u);
  pump_.Pump();
  // Four slots, three deliveries: the two drops took none.
  ASSERT_EQ(client_.sent().size(), 3u);
  EXPECT_EQ(client_.Header(0, "Streamcar-Id"), "2-0");
  EXPECT_EQ(TargetOf(0), 1u);
  EXPECT_EQ(client_.Header(1, "Streamcar-Id"), "3-0");
  EXPECT_EQ(TargetOf(1), 2u);
  EXPECT_EQ(client_.Header(2, "Streamcar-Id"), "4-0");
  EXPECT_EQ(TargetOf(2), 0u);
  EXPECT_EQ(ledger_.StateOf("1-0"), runtime::EntryState::kAcking);
  EXPECT_EQ(ledger_.StateOf("5-0"), runtime::EntryState::kAcking);
  EXPECT_EQ(settlement_.queued_acks(), 2u);
  EXPECT_EQ(metrics_.filtered->Value(), 2);
  // A route counts an attempt made, where streamcar_deliveries_total does: at its answer.
  EXPECT_EQ(Routed("0"), 0) << "sent, not answered yet";
  for (size_t i = 0; i < 3; ++i) client_.AnswerStatus(i, 200);
  EXPECT_EQ(Routed("0"), 1);
  EXPECT_EQ(Routed("1"), 1);
  EXPECT_EQ(Routed("default"), 1);
  EXPECT_EQ(metrics_.routed.at(3), nullptr) << "a drop route has no routed series";
  // The three delivered; the drops are no deliveries.
  EXPECT_EQ(metrics_.Delivered(delivery::DeliveryOutcome::kSuccess)->Value(), 3);
}

class RoutedBatchPumpTest : public RoutedPumpTest {
 protected:
  RoutedBatchPumpTest() : RoutedPumpTest(10) {}
};

TEST_F(RoutedBatchPumpTest, ABatchIsSplitIntoOneRequestPerTarget) {
  ASSERT_EQ(ledger_.Admit(
                {Entry("1-0", {{"type", "order.created"}}), Entry("2-0", {{"type", "invoice"}}),
                 Entry("3-0", {{"type", "heartbeat"}}), Entry("4-0", {{"type", "order.created"}}),
                 Entry("5-0", {{"type", "invoice"}, {"region", "eu"}})}),
            5u);
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 2u);
  EXPECT_EQ(TargetOf(0), 1u);
  const std::string& created = client_.sent()[0].request.body;
  EXPECT_NE(created.find("\"1-0\""), std::string::npos) << created;
  EXPECT_NE(created.find("\"4-0\""), std::string::npos) << created;
  EXPECT_NE(created.find("\"5-0\""), std::string::npos) << "route 3 shares route 0's url";
  EXPECT_EQ(created.find("\"2-0\""), std::string::npos) << created;
  EXPECT_EQ(TargetOf(1), 0u);
  const std::string& rest = client_.sent()[1].request.body;
  EXPECT_NE(rest.find("\"2-0\""), std::string::npos) << rest;
  EXPECT_EQ(rest.find("\"1-0\""), std::string::npos) << rest;
  EXPECT_EQ(rest.find("\"3-0\""), std::string::npos) << "the dropped entry is sent nowhere";
  EXPECT_EQ(ledger_.StateOf("3-0"), runtime::EntryState::kAcking);
  // Each request is answered on its own, and its entries' routes counted at its answer.
  client_.AnswerStatus(0, 200);
  EXPECT_EQ(ledger_.StateOf("1-0"), runtime::EntryState::kAcking);
  EXPECT_EQ(ledger_.StateOf("2-0"), runtime::EntryState::kInFlight);
  EXPECT_EQ(Routed("0"), 2);
  EXPECT_EQ(Routed("3"), 1);
  EXPECT_EQ(Routed("default"), 0) << "handler.url's request is not answered yet";
  client_.AnswerStatus(1, 200);
  EXPECT_EQ(Routed("default"), 1);
}

TEST_F(RoutedBatchPumpTest, RequestsWithoutAFreeConnectionAreHandedBackUnsent) {
  // One slot taken by an entry of its own, one by a request of the test's.
  ASSERT_EQ(ledger_.Admit({Entry("1-0", {{"type", "x"}})}), 1u);
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 1u);
  ASSERT_EQ(ledger_.Admit({Entry("2-0", {{"type", "order.created"}}),
                           Entry("3-0", {{"type", "order.paid"}}), Entry("4-0", {{"type", "y"}}),
                           Entry("5-0", {{"type", "order.paid"}})}),
            4u);
  // Two slots left for three targets: the third target's request waits, unsent, queued.
  delivery::HttpRequest filler;
  ASSERT_TRUE(client_.Send(std::move(filler), Millis(1), [](const delivery::HandlerResponse&) {}));
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 4u);
  EXPECT_EQ(TargetOf(2), 1u);
  EXPECT_EQ(TargetOf(3), 2u);
  EXPECT_EQ(ledger_.StateOf("4-0"), runtime::EntryState::kQueued);
  EXPECT_EQ(Routed("default"), 0) << "counted at an answer, not when sent or handed back";
  client_.AnswerStatus(0, 200);  // a slot frees: the handed-back entry goes out next
  EXPECT_EQ(Routed("default"), 1);
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 5u);
  EXPECT_EQ(TargetOf(4), 0u);
  EXPECT_EQ(client_.Header(4, "Streamcar-Id"), "<absent>") << "a batch request";
  EXPECT_NE(client_.sent()[4].request.body.find("\"4-0\""), std::string::npos);
  client_.AnswerStatus(4, 200);
  EXPECT_EQ(Routed("default"), 2);
}

TEST_F(RoutedBatchPumpTest, AShardsLaneSendsOnlyTheLeadingRunAndKeepsTheRestBehindIt) {
  ledger_.OrderAllInOneLane();
  ASSERT_EQ(ledger_.Admit({Entry("1-0", {{"type", "order.created"}}),
                           Entry("2-0", {{"type", "order.created"}}), Entry("3-0", {{"type", "x"}}),
                           Entry("4-0", {{"type", "order.created"}})}),
            4u);
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 1u) << "one lane: one hand-out at a time";
  const std::string& first = client_.sent()[0].request.body;
  EXPECT_NE(first.find("\"2-0\""), std::string::npos) << first;
  EXPECT_EQ(first.find("\"3-0\""), std::string::npos) << first;
  EXPECT_EQ(first.find("\"4-0\""), std::string::npos) << "nothing overtakes 3-0";
  client_.AnswerStatus(0, 200);
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 2u);
  EXPECT_EQ(TargetOf(1), 0u);
  EXPECT_NE(client_.sent()[1].request.body.find("\"3-0\""), std::string::npos);
  EXPECT_EQ(client_.sent()[1].request.body.find("\"4-0\""), std::string::npos);
  client_.AnswerStatus(1, 200);
  pump_.Pump();
  ASSERT_EQ(client_.sent().size(), 3u);
  EXPECT_EQ(TargetOf(2), 1u);
  EXPECT_NE(client_.sent()[2].request.body.find("\"4-0\""), std::string::npos);
}

}  // namespace
}  // namespace streamcar
