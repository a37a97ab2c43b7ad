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
    // The group's lag read with it (nullopt while unknown), and when that beat was sent.
    std::optional<int64_t> lag;
    std::optional<SteadyTime> read_at;

    // The entries known to wait in the stream (SHARDING.md B6.1): the `held` ones, and what the
    // last gauge beat read (pending and lag) when it was sent after the last settlement. A read
    // from before it may count entries acknowledged since, and would make a shard that just
    // drained look busy until the next beat.
    int64_t Waiting(int64_t held) const;
  };

  // `ids` were settled at `at`. The id kept is the highest so far: settlements finish out of
  // order (acknowledgements and dead letters go in separate plans, retries come later).
  void Settled(std::span<const std::string> ids, SteadyTime at);
  // A gauge beat sent at `read_at` read these (lag: nullopt when it could not tell).
  void SetRead(int64_t pending, std::optional<int64_t> lag, SteadyTime read_at);
  Snapshot Read() const;

 private:
  mutable std::mutex mutex_;
  Snapshot snapshot_;
};

}  // namespace streamcar::runtime
