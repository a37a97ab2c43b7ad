#pragma once
// Every cadence of a subscription's loop, in one place: how often each beat runs and how long each
// wait is. The parts that run them name these (a class's own constant is an alias of one here), so
// that "how often does streamcar ask Redis X" has one answer to read and to change.

#include "sidecar/common/clock.h"

namespace streamcar::runtime::cadence {

// The loop tells the watchdog it is alive (admin/health.h; /healthz).
inline constexpr Millis kWatchdogBeat{1000};
// A BLOCK read of new entries returns at least this often, so that a step falling due during it
// (a claim, a reclaim beat, a stop) waits at most this long.
inline constexpr Millis kReadBlock{1000};
// The gauges Redis knows (pending, consumers, the oldest pending entry's age) are read again.
inline constexpr Millis kGaugeRefresh{5000};
// The lag is counted (an XINFO/XLEN pass that can cost a scan) at most this often.
inline constexpr Millis kLagCount{60000};
// handler.health_url is asked again (SPEC 3.6).
inline constexpr Millis kHealthProbe{1000};
// A consumer-reaping pass (SPEC 4.6) at most this often, the first at a random offset below it.
inline constexpr Millis kReapPass{60000};
// The lease keepalive extends what the loop holds well inside claim.min_idle (SPEC 3.2).
constexpr Millis KeepaliveInterval(Millis min_idle) { return min_idle / 3; }
// The consumer-name lease (SPEC 4.7, consumer_lease.h) is renewed a third of its expiry after
// the last renewal was sent, and a process waiting for the name looks at it a dozen times per
// expiry (at least every 50 ms apart): a live holder's renewal is seen within a third and a
// twelfth, and a dead holder's lease is taken within a twelfth of its end.
constexpr Millis ConsumerLeaseRenewal(Millis expiry) { return expiry / 3; }
constexpr Millis ConsumerLeasePoll(Millis expiry) {
  return expiry / 12 > Millis(50) ? expiry / 12 : Millis(50);
}

}  // namespace streamcar::runtime::cadence
