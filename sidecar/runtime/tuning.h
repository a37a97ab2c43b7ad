#pragma once
// Two latency-for-CPU trades of the event loop that no configuration key exposes: they are
// chosen by bench/run (docs/benchmarks.md "Lingers"), and the environment overrides them for a
// measurement or an unusual load.
//
//   STREAMCAR_ACK_LINGER   how long an acknowledgement may wait for others to share its XACK
//   STREAMCAR_READ_LINGER  how long after a read that brought fewer entries than it asked for the
//                          next XREADGROUP waits, so that it brings several at once
//
// Each takes a duration as the configuration does ("2ms", "0s"), at most kMaxLinger.
//
// And one for tests that would otherwise wait several seconds for a lease to run out:
//
//   STREAMCAR_CONSUMER_LEASE  the consumer-name lease's expiry (SPEC 4.7,
//   runtime/consumer_lease.h),
//                             kMinConsumerLease to kMaxConsumerLease; default 6s

#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"

namespace streamcar::runtime {

struct Tuning {
  // What the benchmark chose (docs/benchmarks.md "Lingers").
  static constexpr Millis kDefaultAckLinger{0};
  static constexpr Millis kDefaultReadLinger{0};
  // A linger longer than this is a mistake (an entry would wait in memory instead of a handler).
  static constexpr Millis kMaxLinger{100};

  Millis ack_linger = kDefaultAckLinger;
  Millis read_linger = kDefaultReadLinger;

  // Shorter leaves a renewal (a third of it) too little room on a busy connection; longer makes
  // a new process wait that long for a dead holder's name.
  static constexpr Millis kMinConsumerLease{300};
  static constexpr Millis kMaxConsumerLease{60000};
  static constexpr Millis kDefaultConsumerLease{6000};
  Millis consumer_lease = kDefaultConsumerLease;
};

// The defaults with the environment's overrides; an error names the variable and what is wrong.
StatusOr<Tuning> TuningFromEnvironment();
// The same from explicit values (null: unset), for tests.
StatusOr<Tuning> ParseTuning(const char* ack_linger, const char* read_linger);
// STREAMCAR_CONSUMER_LEASE's value (null or empty: `*expiry` stays) into `*expiry`.
Status ParseConsumerLease(const char* text, Millis* expiry);

}  // namespace streamcar::runtime
