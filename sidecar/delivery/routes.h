#pragma once
// A subscription's `routes` (SPEC 11) as pure code: which handler target each entry goes to, or
// whether it is filtered out (acknowledged without a delivery), and how a hand-out of entries
// becomes requests when they go to different targets.
//
// Matching: the first route whose `field` is in the entry and whose value equals `equals` (or
// starts with `prefix`) wins; no match: handler.url. The value is the field's first one (a field
// named twice), compared byte for byte; a value that is not valid UTF-8 (binary content) never
// matches, and neither does an entry without the field. So whoever writes an entry chooses among
// the configured targets only, never a URL of their own.
//
// Targets: handler.url is target 0; each distinct url of the routes is one more, in order of
// first appearance (two routes with one url share its connections). The handler client is made
// with exactly these targets (handler_setup.h), and a request names one (HttpRequest::target).

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "sidecar/common/stream_entry.h"
#include "sidecar/config/config.h"

namespace streamcar::delivery {

struct RouteChoice {
  bool drop = false;  // a `drop: true` route matched: acknowledged without a delivery
  size_t target = 0;  // where it is delivered (not drop): an index into RouteTable::targets()
  int route = -1;     // the index in `routes` of the route that matched; -1: none did
};

class RouteTable {
 public:
  explicit RouteTable(const config::Subscription& sub);

  // Whether the subscription has routes at all (without, every entry goes to target 0).
  bool active() const { return !routes_.empty(); }
  RouteChoice Choose(const StreamEntry& entry) const;
  // handler.url, then each distinct url of the routes.
  const std::vector<std::string>& targets() const { return targets_; }

 private:
  struct Route {
    std::string field;
    std::string text;
    bool prefix = false;
    bool drop = false;
    size_t target = 0;
  };
  std::vector<Route> routes_;
  std::vector<std::string> targets_;
};

// The route label of streamcar_routed_total: the route's index in `routes` ("0", "1", ...), or
// "default" for entries no route matched. Bounded by the configuration, unlike a url or a value.
std::string RouteLabel(int route);

// How one hand-out of entries (their choices, in hand-out order) goes out.
struct RoutePlan {
  std::vector<size_t> dropped;  // acknowledged without a delivery
  struct Request {
    size_t target = 0;
    std::vector<size_t> items;  // in hand-out order
  };
  // One request per target, in the order of each target's first entry.
  std::vector<Request> requests;
  // The entries from this index on are not in the plan: they go back to be handed out again.
  size_t planned = 0;
};

// `in_order` (a shard's single lane, whose hand-out is a run the handler processes in order):
// only the leading run of entries with the same fate (all dropped, or all to one target) is
// planned, so nothing overtakes an entry it follows. Otherwise every entry is planned: the drops,
// and one request per target (entries are in no promised order, and with ordering.key_field a
// hand-out holds at most one entry per key).
RoutePlan PlanRoutes(std::span<const RouteChoice> choices, bool in_order);

}  // namespace streamcar::delivery
