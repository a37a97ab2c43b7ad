#pragma once
// SPEC 2, "Reload": reads the configuration file again and says what to do with it. A file that
// does not load changes nothing and is logged with the message `check` prints; a change to a key
// that cannot change while running (config/config_diff.h) is refused with one line naming the
// keys; otherwise the live changes are handed back for app/run.cc to apply. Each reload is
// counted in streamcar_config_reloads_total{result}. Main thread only.

#include <optional>
#include <string>
#include <vector>

#include "sidecar/admin/metrics.h"
#include "sidecar/config/config.h"
#include "sidecar/config/config_diff.h"

namespace streamcar::app {

// Live changes to apply: the configuration as loaded, and what differs from the running one.
struct LiveChanges {
  config::Config next;
  std::vector<config::ConfigChange> changes;  // every one live; empty: nothing changed
};

// The indices of the subscriptions `changes` touch, in order, each once.
std::vector<size_t> SubscriptionsChanged(const std::vector<config::ConfigChange>& changes);
// A subscription's retention changed: the retention beat is built again.
bool RetentionChanged(const std::vector<config::ConfigChange>& changes);

class ConfigReloader {
 public:
  // `loaded` is the configuration as the loader returned it, before `run` settled anything.
  ConfigReloader(config::Config loaded, admin::Metrics* metrics);

  // Why a reload is asked for: SIGHUP, the watcher's event, or the look once the subscriptions
  // have started (the file may have changed while `run` waited for Redis, before it watched;
  // silent when nothing changed).
  enum class Cause { kSignal, kFileChanged, kStarted };
  // Reads the file. nullopt when there is nothing to apply: refused or invalid (logged and
  // counted here), or the text is the one read last (the watcher and a SIGHUP after the same
  // edit, a ConfigMap swap's other names, a SIGHUP for nothing: not counted; a SIGHUP logged).
  std::optional<LiveChanges> Read(Cause cause);
  // `changes` were applied: the running configuration is theirs from now on.
  void Applied(LiveChanges changes);

 private:
  config::Config loaded_;
  admin::Metrics* metrics_;
  std::optional<std::string> last_text_;  // the file's text at the last read (none before kStarted)
};

}  // namespace streamcar::app
