#include "sidecar/runtime/progress_report.h"

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
void ProgressReport::SetPending(int64_t pending) {
  std::lock_guard lock(mutex_);
  snapshot_.pending = pending;
}

ProgressReport::Snapshot ProgressReport::Read() const {
  std::lock_guard lock(mutex_);
  return snapshot_;
}

}  // namespace streamcar::runtime
