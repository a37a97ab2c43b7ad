#pragma once
// May the delivery pump POST now, and until when is it paused? A DeliveryGate answers for one
// reason to hold delivery back: the handler refusing connections (refused_connect_gate.h), its
// health check failing (health_gate.h), a shard member's local lease running out
// (sharding/lease_gate.h), the circuit breaker (circuit_breaker_gate.h), the rate limit
// (rate_limit_gate.h). One more gate is one file (and a line in handler_gates.cc): the pump asks
// every gate before each POST, tells each every request that leaves and every answer, and says
// when they hold back entries that are ready; the ledger keeps only what the gates say together
// ("paused until", EntryLedger::SetPause), for intake to know whether to read and for the loop's
// timer to know when delivery goes on by itself.
//
// Single-threaded: the subscription's loop thread makes every call (what a gate shares with
// other loops is its own to guard: Claim). A gate whose state changes
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
  // does not (its member goes on reading its shard, through the fence), nor does the rate
  // limit's (a pause of a token's time: intake reads ahead up to the ledger's room, as for a
  // slow handler). A closed gate that lets reading go on still pauses delivery until it
  // reopens (EntryLedger::Pause::delivery_until).
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
  // A request is about to leave at `now`, every gate having said open: a gate whose state other
  // threads change too (a rate limit whose bucket the shard loops of a sharded subscription
  // share) takes what it lets through here, in one step with the check, and says false when
  // another thread took it first; the pump then holds the entries back. Others say true.
  virtual bool Claim(SteadyTime /*now*/) { return true; }
  // A request (one entry or a batch) leaves for the handler at `now`, the gates being open: for
  // gates that count requests (a rate limit's tokens, a breaker's one probe). Others ignore it.
  virtual void OnSent(SteadyTime /*now*/) {}
  // The handler's answer to a request (kRefused included) at `now`: for gates that learn from
  // answers. Others ignore it.
  virtual void OnAnswer(const delivery::HandlerResponse& /*response*/, SteadyTime /*now*/) {}
  // The pump had a free connection and entries ready at `now`, and this gate (closed) held them
  // back: for gates that count the time they cost. Others ignore it.
  virtual void OnHeldBack(SteadyTime /*now*/) {}
};

}  // namespace streamcar::runtime
