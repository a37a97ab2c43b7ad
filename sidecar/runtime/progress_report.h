#pragma once
// What a subscription loop tells its owner of its progress, across threads. A sharded member
// sends it in its heartbeats (SHARDING.md B4 step 8) so that `streamcar status` can show each
// shard's last acknowledgement and pending count (C2) without reading the shard itself.
//
// Written on the loop thread when a settlement or a gauge beat changes something (not per
// entry), read by the member thread once per heartbeat.

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "sidecar/common/clock.h"

namespace streamcar::runtime {

class ProgressReport {
 public:
  struct Snapshot {
    // The highest entry id acknowledged or dead-lettered ("" before the first), and when.
    std::string last_settled_id;
    std::optional<SteadyTime> settled_at;
    // The group's pending count at the last gauge beat (nullopt before the first).
    std::optional<int64_t> pending;
  };

  // `ids` were settled at `at`. The id kept is the highest so far: settlements finish out of
  // order (acknowledgements and dead letters go in separate plans, retries come later).
  void Settled(std::span<const std::string> ids, SteadyTime at);
  void SetPending(int64_t pending);
  Snapshot Read() const;

 private:
  mutable std::mutex mutex_;
  Snapshot snapshot_;
};

}  // namespace streamcar::runtime
