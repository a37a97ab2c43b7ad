#pragma once
// One live process per consumer name (SPEC 4.7), decided on the subscription's loop: what to send
// to Redis when (redis/consumer_lease.h has the wire form), what each answer means, and until
// when the lease may be relied on. Pure: time is passed in, nothing here does I/O.
//
//   acquiring --(ours)--> held --(another holds it)--> lost: stop (exit 1)
//       │  looks every PollInterval; a holder whose lease is renewed meanwhile is live:
//       └─ stop (exit 1 naming it), or with consumer.wait_for_name keep polling
//
// Held, it is renewed a third of the expiry after the last send (runtime/cadences.h), and is
// *usable* until the send time of the last renewal Redis confirmed plus two thirds of the
// expiry. Redis set the expiry when the script ran, after that send, so usable_until always ends
// at least a third of the expiry before Redis's does (on clocks that run at the same rate): a
// step sent while usable lands while the lease is still ours. The delivery pump (the gate,
// consumer_lease_gate.h) and the settlement ask UsableAt before every POST and every plan: a
// process that froze past its lease wakes with it unusable, sends nothing but the renewal, and
// stops when the renewal finds another token.
//
// A renewal that finds the lease missing takes it again (Redis restarted without persistence,
// or a failover promoted a replica that had not seen it): nobody held it at that moment, and
// this process is the live holder.
//
// Loop thread only.

#include <optional>
#include <string>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/consumer_lease.h"
#include "sidecar/redis/reply.h"
#include "sidecar/runtime/cadences.h"

namespace streamcar::runtime {

class ConsumerLease {
 public:
  struct Options {
    std::string key;  // keys::ConsumerLeaseKey
    redis::LeaseIdentity identity;
    Millis expiry{0};            // Tuning::consumer_lease (runtime/tuning.h)
    bool wait_for_name = false;  // consumer.wait_for_name
    // For the log lines and the exit message.
    std::string subscription;
    std::string stream;
    std::string group;
    std::string consumer;
  };

  // What the loop does after an answer.
  enum class Step {
    kNothing,   // as before; send again at NextSendAt
    kAcquired,  // taken for the first time: intake may start
    kStop,      // retrying cannot fix it: stop_reason() for fatal() (exit 1)
  };

  explicit ConsumerLease(Options options);

  // The take or renewal to send at `now` (and that it is in flight from `now`), or nullopt when
  // none is due, one is in flight, or the lease was lost.
  std::optional<redis::Command> TakeDue(SteadyTime now);
  // When the next one falls due (nullopt: one is in flight, or the lease was lost).
  std::optional<SteadyTime> NextSendAt() const;
  // The answer to what TakeDue returned last (or the connection's failure), at `now`.
  Step OnReply(const StatusOr<redis::Reply>& reply, SteadyTime now);
  // The answer never came: the connection went down with it outstanding.
  void Abandoned(SteadyTime now) { OnReply(Status(StatusCode::kIo, "connection closed"), now); }

  // Whether the lease may be relied on at `now` (see above).
  bool UsableAt(SteadyTime now) const { return held_ && now < usable_until_; }
  bool held() const { return held_; }
  const Status& stop_reason() const { return stop_reason_; }
  // Deletes the lease if it is still ours (a clean shutdown: the next process takes the name at
  // once); nullopt when this process never held it or lost it.
  std::optional<redis::Command> Release() const;

  Millis RenewInterval() const { return cadence::ConsumerLeaseRenewal(options_.expiry); }
  Millis PollInterval() const { return cadence::ConsumerLeasePoll(options_.expiry); }

 private:
  Step OnOurs(const redis::LeaseReply& reply, SteadyTime sent);
  Step OnHeldByAnother(const redis::LeaseReply& reply, SteadyTime now);
  std::string Describe() const;  // consumer "c" of group "g" on stream "s"

  const Options options_;
  bool held_ = false;
  bool lost_ = false;
  bool in_flight_ = false;
  SteadyTime sent_at_{};
  SteadyTime next_send_{};  // the epoch: at once
  SteadyTime usable_until_{};
  std::optional<int64_t> last_remaining_ms_;  // acquiring: the holder's PTTL at the last poll
  bool logged_waiting_ = false;
  bool logged_live_ = false;
  Status stop_reason_;
};

}  // namespace streamcar::runtime
