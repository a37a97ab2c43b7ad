#include "sidecar/delivery/routes.h"

#include <algorithm>

#include "sidecar/common/text.h"

namespace streamcar::delivery {

RouteTable::RouteTable(const config::Subscription& sub) {
  targets_.push_back(sub.handler.url);
  for (const auto& route : sub.routes) {
    Route made;
    made.field = route.field;
    made.prefix = !route.equals.has_value();
    made.text = route.equals ? *route.equals : route.prefix.value_or("");
    made.drop = route.drop;
    if (!route.drop) {
      auto known = std::find(targets_.begin(), targets_.end(), route.url);
      made.target = static_cast<size_t>(known - targets_.begin());
      if (known == targets_.end()) targets_.push_back(route.url);
    }
    routes_.push_back(std::move(made));
  }
}

RouteChoice RouteTable::Choose(const StreamEntry& entry) const {
  for (size_t i = 0; i < routes_.size(); ++i) {
    const Route& route = routes_[i];
    const std::string* value = entry.Find(route.field);
    if (value == nullptr || !IsValidUtf8(*value)) continue;
    const bool matches = route.prefix ? value->starts_with(route.text) : *value == route.text;
    if (!matches) continue;
    return RouteChoice{route.drop, route.target, static_cast<int>(i)};
  }
  return RouteChoice{};
}

std::string RouteLabel(int route) { return route < 0 ? "default" : std::to_string(route); }

RoutePlan PlanRoutes(std::span<const RouteChoice> choices, bool in_order) {
  RoutePlan plan;
  if (choices.empty()) return plan;
  const auto same_fate = [](const RouteChoice& a, const RouteChoice& b) {
    return a.drop == b.drop && (a.drop || a.target == b.target);
  };
  const size_t end = in_order
                         ? static_cast<size_t>(std::find_if_not(choices.begin(), choices.end(),
                                                                [&](const RouteChoice& c) {
                                                                  return same_fate(c, choices[0]);
                                                                }) -
                                               choices.begin())
                         : choices.size();
  for (size_t i = 0; i < end; ++i) {
    const RouteChoice& choice = choices[i];
    if (choice.drop) {
      plan.dropped.push_back(i);
      continue;
    }
    auto request =
        std::find_if(plan.requests.begin(), plan.requests.end(),
                     [&](const RoutePlan::Request& r) { return r.target == choice.target; });
    if (request == plan.requests.end()) {
      plan.requests.push_back({choice.target, {}});
      request = plan.requests.end() - 1;
    }
    request->items.push_back(i);
  }
  plan.planned = end;
  return plan;
}

}  // namespace streamcar::delivery
