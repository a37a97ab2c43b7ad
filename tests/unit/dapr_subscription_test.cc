// Dapr's programmatic subscription (SPEC 11): the app's answer to GET /dapr/subscribe, in both
// of Dapr's shapes, applied to the subscriptions that ask for it.

#include "sidecar/delivery/dapr_subscription.h"

#include <gtest/gtest.h>

namespace streamcar::delivery {
namespace {

config::Subscription DaprSub(std::string stream, std::string url = "http://127.0.0.1:3000") {
  config::Subscription sub;
  sub.stream = std::move(stream);
  sub.group = "billing";
  sub.handler.url = std::move(url);
  sub.handler.format = config::Format::kDapr;
  sub.dead_letter.stream = sub.stream + ":dlq";
  sub.dead_letter.stream_defaulted = true;
  return sub;
}

TEST(DaprSubscribe, V1RouteAndDeadLetterTopic) {
  auto routes = ParseDaprSubscribe(
      R"([{"pubsubname":"pubsub","topic":"orders","route":"orders","deadLetterTopic":"poison"}])");
  ASSERT_TRUE(routes.ok()) << routes.status().message();
  ASSERT_EQ(routes->size(), 1u);
  EXPECT_EQ((*routes)[0].path, "/orders");  // Dapr's docs write the route without its '/'
  std::vector<config::Subscription> subs = {DaprSub("orders")};
  ASSERT_TRUE(ApplyDaprRoutes(*routes, &subs).ok());
  EXPECT_EQ(subs[0].handler.url, "http://127.0.0.1:3000/orders");
  EXPECT_EQ(subs[0].dead_letter.stream, "poison");
  EXPECT_FALSE(subs[0].dead_letter.stream_defaulted);
}

TEST(DaprSubscribe, V2DefaultRouteAndARuleWithoutMatch) {
  auto routes = ParseDaprSubscribe(
      R"([{"pubsubname":"pubsub","topic":"a","routes":{"default":"/a-default"}},)"
      R"( {"pubsubname":"pubsub","topic":"b","routes":{"rules":[{"path":"/b-rule"}]}}])");
  ASSERT_TRUE(routes.ok()) << routes.status().message();
  std::vector<config::Subscription> subs = {DaprSub("a", "http://127.0.0.1:3000/"), DaprSub("b")};
  ASSERT_TRUE(ApplyDaprRoutes(*routes, &subs).ok());
  EXPECT_EQ(subs[0].handler.url, "http://127.0.0.1:3000/a-default");
  EXPECT_EQ(subs[1].handler.url, "http://127.0.0.1:3000/b-rule");
  EXPECT_EQ(subs[0].dead_letter.stream, "a:dlq");  // no deadLetterTopic: the default stays
}

TEST(DaprSubscribe, ACelMatchRuleIsRefusedNotIgnored) {
  auto routes = ParseDaprSubscribe(
      R"([{"pubsubname":"pubsub","topic":"orders","routes":{"rules":[)"
      R"({"match":"event.type == \"order\"","path":"/orders"}],"default":"/products"}}])");
  ASSERT_TRUE(routes.ok());
  std::vector<config::Subscription> subs = {DaprSub("orders")};
  Status s = ApplyDaprRoutes(*routes, &subs);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("subscriptions[0]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("event.type == \"order\""), std::string::npos) << s.message();
  EXPECT_EQ(subs[0].handler.url, "http://127.0.0.1:3000");
}

TEST(DaprSubscribe, ATopicTheAppDoesNotDeclareIsAnError) {
  auto routes = ParseDaprSubscribe(R"([{"pubsubname":"p","topic":"other","route":"/o"}])");
  ASSERT_TRUE(routes.ok());
  std::vector<config::Subscription> subs = {DaprSub("orders")};
  Status s = ApplyDaprRoutes(*routes, &subs);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("subscriptions[0].handler.url"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("\"orders\""), std::string::npos);
  EXPECT_NE(s.message().find("\"other\""), std::string::npos);
}

TEST(DaprSubscribe, OnlySubscriptionsWithoutAPathAsk) {
  auto routes = ParseDaprSubscribe("[]");
  ASSERT_TRUE(routes.ok());
  std::vector<config::Subscription> subs = {DaprSub("orders", "http://127.0.0.1:3000/fixed")};
  config::Subscription json = DaprSub("other");
  json.handler.format = config::Format::kJson;
  subs.push_back(json);
  EXPECT_TRUE(ApplyDaprRoutes(*routes, &subs).ok());
  EXPECT_EQ(subs[0].handler.url, "http://127.0.0.1:3000/fixed");
  auto app = DaprAppUrl(subs);
  ASSERT_TRUE(app.ok());
  EXPECT_EQ(*app, "");
}

TEST(DaprSubscribe, PubsubnameEqualToTheGroupWinsADuplicateTopic) {
  auto routes = ParseDaprSubscribe(R"([{"pubsubname":"other","topic":"orders","route":"/x"},)"
                                   R"({"pubsubname":"billing","topic":"orders","route":"/y"}])");
  ASSERT_TRUE(routes.ok());
  std::vector<config::Subscription> subs = {DaprSub("orders")};
  ASSERT_TRUE(ApplyDaprRoutes(*routes, &subs).ok());
  EXPECT_EQ(subs[0].handler.url, "http://127.0.0.1:3000/y");
}

TEST(DaprSubscribe, ADeadLetterTopicConflictingWithTheFileIsAnError) {
  auto routes = ParseDaprSubscribe(
      R"([{"pubsubname":"p","topic":"orders","route":"/o","deadLetterTopic":"poison"}])");
  ASSERT_TRUE(routes.ok());
  std::vector<config::Subscription> subs = {DaprSub("orders")};
  subs[0].dead_letter.stream = "mine";
  subs[0].dead_letter.stream_defaulted = false;
  Status s = ApplyDaprRoutes(*routes, &subs);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("subscriptions[0].dead_letter.stream"), std::string::npos);
}

TEST(DaprSubscribe, MalformedAnswersNameWhatIsWrong) {
  EXPECT_NE(ParseDaprSubscribe("{").status().message().find("not JSON"), std::string::npos);
  EXPECT_NE(ParseDaprSubscribe("{}").status().message().find("array"), std::string::npos);
  EXPECT_NE(
      ParseDaprSubscribe(R"([{"route":"/x"}])").status().message().find("/dapr/subscribe[0].topic"),
      std::string::npos);
  EXPECT_NE(ParseDaprSubscribe(R"([{"topic":"t","route":"/a b"}])")
                .status()
                .message()
                .find("/dapr/subscribe[0].route"),
            std::string::npos);
  EXPECT_NE(ParseDaprSubscribe(R"([{"topic":"t","route":"/a\r\nX: y"}])")
                .status()
                .message()
                .find("control"),
            std::string::npos);
}

TEST(DaprSubscribe, OneAppPerSidecar) {
  std::vector<config::Subscription> subs = {DaprSub("a"), DaprSub("b", "http://127.0.0.1:4000")};
  auto app = DaprAppUrl(subs);
  ASSERT_FALSE(app.ok());
  EXPECT_NE(app.status().message().find("subscriptions[1].handler.url"), std::string::npos);
  subs.pop_back();
  ASSERT_TRUE(DaprAppUrl(subs).ok());
  EXPECT_EQ(*DaprAppUrl(subs), "http://127.0.0.1:3000");
  // Another Unix socket is another app.
  subs.push_back(DaprSub("c"));
  subs.back().handler.unix_socket = "/run/app.sock";
  auto socket = DaprAppUrl(subs);
  ASSERT_FALSE(socket.ok());
  EXPECT_NE(socket.status().message().find("subscriptions[1].handler.unix_socket"),
            std::string::npos)
      << socket.status().message();
}

// A query in the app's url was written for every request to it: the declared route keeps it.
TEST(DaprSubscribe, TheUrlsQueryStaysOnTheRoute) {
  auto routes = ParseDaprSubscribe(R"([{"pubsubname":"p","topic":"a","route":"/a"},)"
                                   R"({"pubsubname":"p","topic":"b","route":"/b?x=1"}])");
  ASSERT_TRUE(routes.ok()) << routes.status().message();
  std::vector<config::Subscription> subs = {DaprSub("a", "http://127.0.0.1:3000?v=2"),
                                            DaprSub("b", "http://127.0.0.1:3000/?v=2")};
  ASSERT_TRUE(ApplyDaprRoutes(*routes, &subs).ok());
  EXPECT_EQ(subs[0].handler.url, "http://127.0.0.1:3000/a?v=2");
  EXPECT_EQ(subs[1].handler.url, "http://127.0.0.1:3000/b?x=1&v=2");
}

}  // namespace
}  // namespace streamcar::delivery
