#include "sidecar/runtime/progress_report.h"

#include <algorithm>

#include "sidecar/common/text.h"

namespace streamcar::runtime {

void ProgressReport::Settled(std::span<const std::string> ids, SteadyTime at) {
  if (ids.empty()) return;
  std::lock_guard lock(mutex_);
  auto highest = ParseEntryId(snapshot_.last_settled_id);
  for (const auto& id : ids) {
    const auto parsed = ParseEntryId(id);
    if (parsed && (!highest || *parsed > *highest)) {
      highest = parsed;
      snapshot_.last_settled_id = id;
    }
  }
  snapshot_.settled_at = at;
}
void ProgressReport::SetRead(int64_t pending, std::optional<int64_t> lag, SteadyTime read_at) {
  std::lock_guard lock(mutex_);
  snapshot_.pending = pending;
  snapshot_.lag = lag;
  snapshot_.read_at = read_at;
}

int64_t ProgressReport::Snapshot::Waiting(int64_t held) const {
  int64_t waiting = held;
  if (read_at && (!settled_at || *read_at > *settled_at)) {
    waiting = std::max(waiting, pending.value_or(0) + lag.value_or(0));
  }
  return waiting;
}

ProgressReport::Snapshot ProgressReport::Read() const {
  std::lock_guard lock(mutex_);
  return snapshot_;
}

}  // namespace streamcar::runtime
