#pragma once
// Where every entry that comes in from Redis goes: the one routing of the own-PEL drain at
// start, new entries (XREADGROUP >), the reclaim beat (XAUTOCLAIM of dead peers' entries) and the
// recovery re-read of the own pending list. Loop thread only, like the ledger it feeds.
//
//   - payload gone (read back as [id, nil], DESIGN.md trap 1): held by id only, acknowledged,
//     counted in streamcar_deleted_entries_total, never POSTed;
//   - exhausted on arrival (attempts > max_attempts: it crashed a consumer at every delivery):
//     held with its room and dead-lettered with reason max_attempts, never POSTed again;
//   - the rest: admitted for delivery, counted in streamcar_claimed_total{source} when it came
//     from the drain or the recovery re-read ("drain") or the reclaim beat ("autoclaim").
//
// Ids the ledger already holds (in any state: queued, in flight, being acknowledged ...) are
// skipped whatever the entry looks like: what holds them settles them, and a read that brings one
// again must not deliver, acknowledge or dead-letter it a second time. Nothing skipped is counted.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/stream_entry.h"
#include "sidecar/delivery/outcome.h"
#include "sidecar/redis/stream_ops.h"
#include "sidecar/runtime/attempt_observer.h"
#include "sidecar/runtime/entry_ledger.h"

namespace streamcar::runtime {

// Where the entries came from.
enum class IntakeSource { kDrain, kNew, kReclaim, kRecover };
std::string_view Name(IntakeSource source);

// The settlement of what is routed without a delivery (the subscription's Settlement).
struct IntakeSettlement {
  // Acknowledge `id`, whose payload is gone (not a delivered entry).
  std::function<void(std::string id)> acknowledge;
  // Dead-letter the entry the ledger holds under `id`, with this record metadata.
  std::function<void(std::string id, redis::DeadLetterMeta meta)> dead_letter;
};

class Intake {
 public:
  // `ledger` and `observer` outlive the intake; `clock` gives the dead
  // letter's time.
  Intake(std::string subscription, delivery::OutcomePolicy policy, EntryLedger* ledger,
         IntakeSettlement settlement, AttemptObserver* observer, const Clock& clock);

  // Routes what a read or a claim brought; returns how many entries were admitted for delivery.
  size_t Route(std::vector<StreamEntry> entries, IntakeSource source);

  // The metadata of an entry exhausted on arrival (the text of SPEC 3.3's max_attempts record).
  static redis::DeadLetterMeta ExhaustedMeta(int attempts, int64_t time_ms);

 private:
  const std::string subscription_;
  const delivery::OutcomePolicy policy_;
  EntryLedger* ledger_;
  IntakeSettlement settlement_;
  AttemptObserver* observer_;
  const Clock& clock_;
};

}  // namespace streamcar::runtime
