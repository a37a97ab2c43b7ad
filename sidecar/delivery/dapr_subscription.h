#pragma once
// Dapr's programmatic subscription (SPEC 11): with `format: dapr` and a handler url without a
// path, the app says at start, in its answer to GET /dapr/subscribe, which path each topic (a
// stream) is delivered to and where its dead letters go. Pure code: reading that answer and
// applying it to the subscriptions; app/dapr_subscribe.cc asks the app.

#include <string>
#include <string_view>
#include <vector>

#include "sidecar/common/status.h"
#include "sidecar/config/config.h"

namespace streamcar::delivery {

// One element of the app's answer, in either of Dapr's shapes:
//   v1 {"pubsubname":"pubsub","topic":"orders","route":"/orders","deadLetterTopic":"poison"}
//   v2 {"pubsubname":..,"topic":..,"routes":{"rules":[{"match":"<CEL>","path":"/x"}],
//       "default":"/orders"},"deadLetterTopic":..}
struct DaprTopicRoute {
  std::string pubsubname;
  std::string topic;
  std::string path;  // "/orders": route, routes.default, or a rule without match; "" if none
  std::string dead_letter_topic;  // "" when not declared
  std::string match;              // the first rule's CEL match expression, "" when none has one
};

// The app's answer to GET /dapr/subscribe (a JSON array). kInvalid naming the element and the
// member when it is not one: not an array, an element without a topic, a route that is not a
// string. A route without a leading '/' gets one (Dapr's documentation writes "route": "orders").
StatusOr<std::vector<DaprTopicRoute>> ParseDaprSubscribe(std::string_view body);

// True when the subscription asks the app for its route (config::AsksAppForDaprRoutes).
bool WantsDaprSubscribe(const config::Subscription& subscription);

// The base url the app is asked at: the handler url of the first subscription that wants a
// route, "" when none does. kInvalid when two such subscriptions name different apps (scheme,
// host or port), naming both.
StatusOr<std::string> DaprAppUrl(const std::vector<config::Subscription>& subscriptions);

// Gives every subscription that wants a route (WantsDaprSubscribe) the path the app declared for
// its stream as the topic (handler.url = <scheme://authority> + path), and the declared
// deadLetterTopic as its dead-letter stream. When the app declares the topic more than once, the
// declaration whose pubsubname equals the group is taken. kInvalid, naming the subscription's
// path in the configuration: a topic the app does not declare, a route with a CEL `match` rule
// (streamcar does not evaluate CEL: refused rather than ignored), no route, a deadLetterTopic
// that conflicts with a dead_letter.stream set in the file, or one on a sharded subscription.
Status ApplyDaprRoutes(const std::vector<DaprTopicRoute>& routes,
                       std::vector<config::Subscription>* subscriptions);

}  // namespace streamcar::delivery
