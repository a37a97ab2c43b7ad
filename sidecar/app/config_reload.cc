#include "sidecar/app/config_reload.h"

#include <prometheus/counter.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include "sidecar/common/log.h"
#include "sidecar/config/loader.h"

namespace streamcar::app {
namespace {

// The file's text, or nullopt when it cannot be read now (LoadConfigFile then says why).
std::optional<std::string> TextOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The distinct reasons of the refused keys, joined by "; ".
std::string WhyRefused(const std::vector<config::ConfigChange>& changes) {
  std::set<std::string> seen;
  std::string out;
  for (const auto& change : changes) {
    if (change.live || !seen.insert(change.why_not).second) continue;
    if (!out.empty()) out += "; ";
    out += change.why_not;
  }
  return out;
}

}  // namespace

std::vector<size_t> SubscriptionsChanged(const std::vector<config::ConfigChange>& changes) {
  static constexpr std::string_view kPrefix = "subscriptions[";
  std::vector<size_t> indices;
  for (const auto& change : changes) {
    if (!change.path.starts_with(kPrefix)) continue;
    const size_t index = std::strtoul(change.path.c_str() + kPrefix.size(), nullptr, 10);
    if (indices.empty() || indices.back() != index) indices.push_back(index);
  }
  return indices;
}

bool RetentionChanged(const std::vector<config::ConfigChange>& changes) {
  for (const auto& change : changes) {
    if (change.path.starts_with("subscriptions[") &&
        change.path.find("].retention") != std::string::npos) {
      return true;
    }
  }
  return false;
}

ConfigReloader::ConfigReloader(config::Config loaded, admin::Metrics* metrics)
    : loaded_(std::move(loaded)), metrics_(metrics) {}

std::optional<LiveChanges> ConfigReloader::Read(Cause cause) {
  const std::string& path = loaded_.source_file;
  auto text = TextOf(path);
  if (text == last_text_) {
    // The watcher and a SIGHUP after an edit both come for the same text: one reload, counted
    // once. The signal is answered all the same.
    if (cause == Cause::kSignal) {
      LogInfo("configuration reload: the file is as it was last read", {{"config", path}});
    }
    return std::nullopt;
  }
  last_text_ = text;
  // The very loader `check` runs, so that the line logged is the one `check` prints.
  auto next = text ? config::LoadConfigText(*text, path) : config::LoadConfigFile(path);
  if (!next.ok()) {
    metrics_->ConfigReloads("invalid").Increment();
    LogError(next.status().message(), {{"reload", "invalid"}, {"config", path}});
    return std::nullopt;
  }
  auto changes = config::DiffConfig(loaded_, *next);
  if (changes.empty() && cause == Cause::kStarted) return std::nullopt;
  if (const std::string refused = config::RefusedKeys(changes); !refused.empty()) {
    metrics_->ConfigReloads("refused").Increment();
    LogWarn("configuration reload refused: the running configuration stays",
            {{"reload", "refused"}, {"keys", refused}, {"why", WhyRefused(changes)}});
    return std::nullopt;
  }
  return LiveChanges{std::move(*next), std::move(changes)};
}

void ConfigReloader::Applied(LiveChanges changes) {
  metrics_->ConfigReloads("applied").Increment();
  LogInfo(changes.changes.empty() ? "configuration reloaded: nothing changed"
                                  : "configuration reloaded",
          {{"reload", "applied"}, {"keys", config::ChangedKeys(changes.changes)}});
  loaded_ = std::move(changes.next);
}

}  // namespace streamcar::app
