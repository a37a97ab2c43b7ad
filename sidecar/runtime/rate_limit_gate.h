#pragma once
// handler.max_rps (SPEC 11) as a delivery gate: a token bucket (shared_token_bucket.h) of
// max_rps tokens a second with a burst of handler.concurrency, one token per request — a batch
// of entries is one request, as the limit protects the handler from requests. Closed while no
// whole token is there, until the next one comes (its reopening arms the loop's timer: no busy
// loop). Reading goes on meanwhile: a pause of a token's time is a slow handler's, and intake
// reads ahead only up to the ledger's room.
//
// A sharded subscription's shard loops share the bucket, each on its own thread: the token a
// request takes is claimed in one step with the check (Claim), so that two loops that found
// the last one do not both send; the loser's gate closes until the next token, by its timer.
//
// The time delivery waited on the limit (streamcar_rate_limited_seconds_total) is counted from
// when the pump first found entries ready and the bucket empty to when the token that let the
// next request go came: waits for a free connection are not the limit's.
//
// Loop thread only (the bucket is any thread's); time comes from the pump's `now`.

#include <memory>
#include <optional>

#include "sidecar/runtime/attempt_observer.h"
#include "sidecar/runtime/delivery_gate.h"
#include "sidecar/runtime/shared_token_bucket.h"

namespace streamcar::runtime {

class RateLimitGate final : public DeliveryGate {
 public:
  // A bucket of its own: `max_rps` > 0, `burst` >= 1. `observer` (the waiting time) outlives
  // the gate.
  RateLimitGate(double max_rps, int burst, AttemptObserver* observer);
  // A bucket shared with other loops' gates (non-null).
  RateLimitGate(std::shared_ptr<SharedTokenBucket> bucket, AttemptObserver* observer);

  std::string_view name() const override { return "rate_limit"; }
  GateState StateAt(SteadyTime now) const override;
  bool Claim(SteadyTime now) override;
  void OnSent(SteadyTime now) override;
  void OnHeldBack(SteadyTime now) override;

 private:
  // A request's token came at `came`: the wait since entries were held back, if any, is counted.
  void Waited(SteadyTime came);

  std::shared_ptr<SharedTokenBucket> bucket_;
  AttemptObserver* observer_;
  std::optional<SteadyTime> held_since_;  // entries ready, no token, since then
  bool claimed_ = false;                  // Claim took the token of the next request sent
};

}  // namespace streamcar::runtime
