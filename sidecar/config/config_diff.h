#pragma once
// What a reload would change (SPEC 2, "Reload"): the keys whose effective value differs between
// the running configuration and the one just read, by their config path
// ("subscriptions[0].handler.url"), each classed as one that can change while `run` runs or one
// that needs a restart. Pure: app/config_reload.h reads the file and applies the verdict.

#include <string>
#include <vector>

#include "sidecar/config/config.h"

namespace streamcar::config {

struct ConfigChange {
  std::string path;  // "redis.url", "subscriptions[1].retry.max_attempts", "subscriptions"
  bool live = false;
  std::string why_not;  // when not live: why it needs a restart
};

// The keys that differ between `running` and `next`, both as the loader returned them (before
// `run` settles anything of its own, such as a dead-letter stream for a cluster), in `check`'s
// key order. A list of another length is one change at the list's path.
std::vector<ConfigChange> DiffConfig(const Config& running, const Config& next);

// Copies the live keys of a subscription (the ones DiffConfig calls live) from `next` into
// `running`. What `run` settled at start stays: the dead-letter stream, the Dapr topic. The
// caller has stopped the subscription's loop, which reads `running` by reference.
void TakeLiveKeys(const Subscription& next, Subscription* running);

// The keys of `changes` that are not live, joined by ", " ("" when every change is live).
std::string RefusedKeys(const std::vector<ConfigChange>& changes);
// Every key of `changes`, joined by ", ".
std::string ChangedKeys(const std::vector<ConfigChange>& changes);

}  // namespace streamcar::config
