#include "sidecar/delivery/dapr_subscription.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "sidecar/delivery/http_target.h"

namespace streamcar::delivery {
namespace {

Status Invalid(std::string message) { return {StatusCode::kInvalid, std::move(message)}; }

std::string Quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

// A path the app declared, as a request target: a leading '/' added; control bytes, spaces and
// a fragment refused (the app is trusted less than the file, and a route is framing).
Status ReadPath(const rapidjson::Value& value, const std::string& where, std::string* path) {
  if (!value.IsString()) return Invalid(where + " must be a string");
  std::string_view text(value.GetString(), value.GetStringLength());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7f || c == '#') {
      return Invalid(where + " must be a path without spaces, control characters or '#' (got " +
                     Quoted(text) + ")");
    }
  }
  if (text.empty()) return Invalid(where + " must not be empty");
  *path = text.front() == '/' ? std::string(text) : "/" + std::string(text);
  return Status::Ok();
}

std::string OptionalString(const rapidjson::Value& object, const char* member) {
  if (!object.HasMember(member) || !object[member].IsString()) return "";
  return {object[member].GetString(), object[member].GetStringLength()};
}

// routes: {"rules":[{"match","path"}...],"default":"/x"} (Dapr's v2 shape).
Status ReadRoutes(const rapidjson::Value& routes, const std::string& where, DaprTopicRoute* route) {
  if (!routes.IsObject()) return Invalid(where + " must be an object");
  if (routes.HasMember("rules")) {
    const auto& rules = routes["rules"];
    if (!rules.IsArray()) return Invalid(where + ".rules must be an array");
    for (rapidjson::SizeType i = 0; i < rules.Size(); ++i) {
      const std::string rule_where = where + ".rules[" + std::to_string(i) + "]";
      if (!rules[i].IsObject()) return Invalid(rule_where + " must be an object");
      std::string match = OptionalString(rules[i], "match");
      if (!match.empty()) {
        if (route->match.empty()) route->match = std::move(match);
        continue;
      }
      // A rule without a match is the default route (Dapr evaluates the rules in order).
      if (!route->path.empty() || !rules[i].HasMember("path")) continue;
      if (Status s = ReadPath(rules[i]["path"], rule_where + ".path", &route->path); !s.ok()) {
        return s;
      }
    }
  }
  if (routes.HasMember("default")) {
    std::string path;
    if (Status s = ReadPath(routes["default"], where + ".default", &path); !s.ok()) return s;
    if (route->path.empty()) route->path = std::move(path);
  }
  return Status::Ok();
}

Status ReadTopicRoute(const rapidjson::Value& item, const std::string& where,
                      DaprTopicRoute* route) {
  if (!item.IsObject()) return Invalid(where + " must be an object");
  if (!item.HasMember("topic") || !item["topic"].IsString() ||
      item["topic"].GetStringLength() == 0) {
    return Invalid(where + ".topic is required (a non-empty string)");
  }
  route->topic.assign(item["topic"].GetString(), item["topic"].GetStringLength());
  route->pubsubname = OptionalString(item, "pubsubname");
  route->dead_letter_topic = OptionalString(item, "deadLetterTopic");
  if (item.HasMember("routes")) {
    if (Status s = ReadRoutes(item["routes"], where + ".routes", route); !s.ok()) return s;
  }
  if (item.HasMember("route") && route->path.empty()) {
    if (Status s = ReadPath(item["route"], where + ".route", &route->path); !s.ok()) return s;
  }
  return Status::Ok();
}

// scheme://authority of a handler url, which config validation checked.
std::string OriginOf(const std::string& url) { return SplitUrl(url).origin; }

// The app's url with the declared route as its path. A query the url has ("http://app:3000?v=2")
// is kept, after the route's own when it has one: it was written for every request to the app.
std::string RouteUrl(const std::string& url, const std::string& route) {
  const HttpTarget target = SplitUrl(url);
  const size_t query = target.path.find('?');
  std::string routed = target.origin + route;
  if (query == std::string::npos || query + 1 == target.path.size()) return routed;
  routed += route.find('?') == std::string::npos ? '?' : '&';
  return routed + target.path.substr(query + 1);
}

// The declaration of `sub`'s stream: the one whose pubsubname is the group when there are
// several. Null when the app declares none.
const DaprTopicRoute* DeclarationFor(const std::vector<DaprTopicRoute>& routes,
                                     const config::Subscription& sub) {
  const DaprTopicRoute* found = nullptr;
  for (const auto& route : routes) {
    if (route.topic != sub.stream) continue;
    if (route.pubsubname == sub.group) return &route;
    if (found == nullptr) found = &route;
  }
  return found;
}

std::string DeclaredTopics(const std::vector<DaprTopicRoute>& routes) {
  if (routes.empty()) return "none";
  std::string list;
  for (const auto& route : routes) {
    if (!list.empty()) list += ", ";
    list += Quoted(route.topic);
  }
  return list;
}

Status ApplyDeadLetterTopic(const DaprTopicRoute& route, const std::string& where,
                            config::Subscription* sub) {
  if (route.dead_letter_topic.empty()) return Status::Ok();
  if (sub->sharding.enabled()) {
    return Invalid(where + ".dead_letter.stream: the app declares deadLetterTopic " +
                   Quoted(route.dead_letter_topic) + " for topic " + Quoted(route.topic) +
                   ", but a sharded subscription writes dead letters to each shard's own stream");
  }
  if (!sub->dead_letter.stream_defaulted && sub->dead_letter.stream != route.dead_letter_topic) {
    return Invalid(where + ".dead_letter.stream is " + Quoted(sub->dead_letter.stream) +
                   " but the app declares deadLetterTopic " + Quoted(route.dead_letter_topic) +
                   " for topic " + Quoted(route.topic) + ": remove one of them");
  }
  if (route.dead_letter_topic == sub->stream) {
    return Invalid(where + ": the app's deadLetterTopic for topic " + Quoted(route.topic) +
                   " is the topic itself");
  }
  sub->dead_letter.stream = route.dead_letter_topic;
  sub->dead_letter.stream_defaulted = false;
  sub->dead_letter.stream_if_cluster.clear();
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<DaprTopicRoute>> ParseDaprSubscribe(std::string_view body) {
  rapidjson::Document document;
  document.Parse<rapidjson::kParseIterativeFlag>(body.data(), body.size());
  if (document.HasParseError()) {
    return Invalid(std::string("the answer to GET /dapr/subscribe is not JSON: ") +
                   rapidjson::GetParseError_En(document.GetParseError()));
  }
  if (!document.IsArray()) {
    return Invalid("the answer to GET /dapr/subscribe must be a JSON array of subscriptions");
  }
  std::vector<DaprTopicRoute> routes;
  for (rapidjson::SizeType i = 0; i < document.Size(); ++i) {
    DaprTopicRoute route;
    const std::string where = "/dapr/subscribe[" + std::to_string(i) + "]";
    if (Status s = ReadTopicRoute(document[i], where, &route); !s.ok()) return s;
    routes.push_back(std::move(route));
  }
  return routes;
}

bool WantsDaprSubscribe(const config::Subscription& subscription) {
  return config::AsksAppForDaprRoutes(subscription.handler);
}

StatusOr<std::string> DaprAppUrl(const std::vector<config::Subscription>& subscriptions) {
  std::string url;
  size_t first = 0;
  for (size_t i = 0; i < subscriptions.size(); ++i) {
    if (!WantsDaprSubscribe(subscriptions[i])) continue;
    const std::string origin = OriginOf(subscriptions[i].handler.url);
    if (url.empty()) {
      url = origin;
      first = i;
    } else if (origin != url) {
      return Invalid("subscriptions[" + std::to_string(i) +
                     "].handler.url: format dapr without a " +
                     "path asks the app for its routes, and " + Quoted(origin) +
                     " is not the app subscriptions[" + std::to_string(first) + "] asks (" +
                     Quoted(url) + "): one app per sidecar, or give the url a path");
    } else if (subscriptions[i].handler.unix_socket != subscriptions[first].handler.unix_socket) {
      // The question goes over the first one's socket (app/dapr_subscribe.cc): another socket
      // is another app.
      return Invalid("subscriptions[" + std::to_string(i) +
                     "].handler.unix_socket: format dapr without a path asks the app for its " +
                     "routes, and " + Quoted(subscriptions[i].handler.unix_socket) +
                     " is not the socket subscriptions[" + std::to_string(first) + "] asks over (" +
                     Quoted(subscriptions[first].handler.unix_socket) +
                     "): one app per sidecar, or give the url a path");
    }
  }
  return url;
}

Status ApplyDaprRoutes(const std::vector<DaprTopicRoute>& routes,
                       std::vector<config::Subscription>* subscriptions) {
  for (size_t i = 0; i < subscriptions->size(); ++i) {
    config::Subscription& sub = (*subscriptions)[i];
    if (!WantsDaprSubscribe(sub)) continue;
    const std::string where = "subscriptions[" + std::to_string(i) + "]";
    const DaprTopicRoute* route = DeclarationFor(routes, sub);
    if (route == nullptr) {
      return Invalid(where + ".handler.url: format dapr without a path delivers to the route the " +
                     "app declares for topic " + Quoted(sub.stream) +
                     ", and its /dapr/subscribe declares none (topics declared: " +
                     DeclaredTopics(routes) + ")");
    }
    if (!route->match.empty()) {
      return Invalid(where + ": the app's /dapr/subscribe routes topic " + Quoted(sub.stream) +
                     " with a CEL rule (match: " + Quoted(route->match) +
                     "), which streamcar does not evaluate; declare a plain route or " +
                     "routes.default, or use routes in streamcar's configuration (SPEC 11)");
    }
    if (route->path.empty()) {
      return Invalid(where + ": the app's /dapr/subscribe declares topic " + Quoted(sub.stream) +
                     " without a route (route or routes.default)");
    }
    if (Status s = ApplyDeadLetterTopic(*route, where, &sub); !s.ok()) return s;
    sub.handler.url = RouteUrl(sub.handler.url, route->path);
  }
  return Status::Ok();
}

}  // namespace streamcar::delivery
