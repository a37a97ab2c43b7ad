#pragma once
// May the delivery pump POST now, and until when is it paused? A DeliveryGate answers for one
// reason to hold delivery back: the handler refusing connections (refused_connect_gate.h), its
// health check failing (health_gate.h), a shard member's local lease running out
// (sharding/lease_gate.h). A circuit breaker or a rate limit is one more gate, in one file (and a
// line in handler_gates.cc): the pump asks every gate before each POST and tells each the
// handler's answers; the ledger keeps only what the gates say together ("paused until",
// EntryLedger::SetPause), for intake to know whether to read.
//
// Single-threaded: the subscription's loop thread makes every call. A gate whose state changes
// without an answer (a health verdict, a lease renewed on another thread) does not call back:
// its owner kicks the loop, or the next event does.

#include <optional>
#include <string_view>

#include "sidecar/common/clock.h"
#include "sidecar/delivery/outcome.h"

namespace streamcar::runtime {

// What a gate says at one moment.
struct GateState {
  // What reading does while the gate says this. Entries read while delivery cannot go on wait in
  // the ledger with a delivery counted, so the handler's gates hold reads back; the lease's
  // does not (its member goes on reading its shard, through the fence).
  enum class Reads {
    kGoOn,
    kWaitWhileClosed,
    // And, once open again, while anything is held: the held entries are what tries the handler
    // again (with nothing held, one read is the only way to).
    kWaitWhileHeld,
  };

  bool open = true;
  // Closed: when it opens by itself; nullopt: when something else says so (and kicks the loop).
  std::optional<SteadyTime> reopens_at;
  Reads reads = Reads::kGoOn;

  static GateState Open() { return {}; }
  static GateState ClosedUntil(std::optional<SteadyTime> at, Reads reads) {
    return {false, at, reads};
  }
};

class DeliveryGate {
 public:
  virtual ~DeliveryGate() = default;

  // The gate's name, for logs ("refused_connect", "health", "lease").
  virtual std::string_view name() const = 0;
  // What the gate says at `now` (the loop's clock).
  virtual GateState StateAt(SteadyTime now) const = 0;
  // The handler's answer to a request (kRefused included) at `now`: for gates that learn from
  // answers. Others ignore it.
  virtual void OnAnswer(const delivery::HandlerResponse& /*response*/, SteadyTime /*now*/) {}
};

}  // namespace streamcar::runtime
