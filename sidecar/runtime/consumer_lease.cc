#include "sidecar/runtime/consumer_lease.h"

#include <utility>

#include "sidecar/common/log.h"

namespace streamcar::runtime {

ConsumerLease::ConsumerLease(Options options) : options_(std::move(options)) {}

std::optional<redis::Command> ConsumerLease::TakeDue(SteadyTime now) {
  if (lost_ || in_flight_ || now < next_send_) return std::nullopt;
  in_flight_ = true;
  sent_at_ = now;
  return redis::TakeLease(options_.key, options_.identity, options_.expiry);
}

std::optional<SteadyTime> ConsumerLease::NextSendAt() const {
  if (lost_ || in_flight_) return std::nullopt;
  return next_send_;
}

std::optional<redis::Command> ConsumerLease::Release() const {
  if (!held_) return std::nullopt;
  return redis::ReleaseLease(options_.key, options_.identity.token);
}

std::string ConsumerLease::Describe() const {
  return "consumer \"" + options_.consumer + "\" of group \"" + options_.group + "\" on stream \"" +
         options_.stream + "\"";
}

ConsumerLease::Step ConsumerLease::OnReply(const StatusOr<redis::Reply>& reply, SteadyTime now) {
  if (!in_flight_ || lost_) return Step::kNothing;
  in_flight_ = false;
  StatusOr<redis::LeaseReply> parsed = redis::ParseLease(reply, options_.key);
  if (!parsed.ok()) {
    if (parsed.status().code() == StatusCode::kFatal) {
      lost_ = true;
      held_ = false;
      stop_reason_ = parsed.status();
      return Step::kStop;
    }
    // Redis unreachable or refusing for now: asked again soon. Held, the lease stays usable
    // until usable_until_ and no longer: past it the gate holds everything back.
    LogWarn("cannot take or renew the consumer name's lease now",
            {{"subscription", options_.subscription}, {"error", parsed.status().message()}});
    next_send_ = now + PollInterval();
    return Step::kNothing;
  }
  if (parsed->ours) return OnOurs(*parsed, sent_at_);
  return OnHeldByAnother(*parsed, now);
}

ConsumerLease::Step ConsumerLease::OnOurs(const redis::LeaseReply& reply, SteadyTime sent) {
  usable_until_ = sent + options_.expiry - RenewInterval();
  next_send_ = sent + RenewInterval();
  if (!held_) {
    held_ = true;
    LogInfo("consumer name's lease taken",
            {{"subscription", options_.subscription},
             {"consumer", options_.consumer},
             {"instance", options_.identity.instance},
             {"how", reply.how},
             {"expiry_ms", static_cast<int64_t>(options_.expiry.count())}});
    return Step::kAcquired;
  }
  if (reply.how != "renewed") {
    // Nobody held it at that moment, and this process is the live holder: take it again.
    LogWarn(
        "the consumer name's lease was gone from Redis (a restart or a failover?); taken "
        "again",
        {{"subscription", options_.subscription},
         {"consumer", options_.consumer},
         {"how", reply.how}});
  }
  return Step::kNothing;
}

ConsumerLease::Step ConsumerLease::OnHeldByAnother(const redis::LeaseReply& reply, SteadyTime now) {
  if (held_) {
    // Another process took it: this one did not renew in time (it was paused, or cut off from
    // Redis, for longer than the expiry). Whatever it holds is the other's now.
    held_ = false;
    lost_ = true;
    stop_reason_ =
        Status(StatusCode::kFatal,
               "the lease on " + Describe() + " was taken by instance \"" + reply.holder +
                   "\" while this process held it (it did not renew the lease in time: "
                   "paused or cut off from Redis); stopped before posting or "
                   "acknowledging anything more");
    return Step::kStop;
  }
  // Renewed since the last look: the holder is alive. Without a renewal the lease runs out, and
  // the next look takes it.
  const bool renewed = last_remaining_ms_ && reply.remaining_ms > *last_remaining_ms_;
  last_remaining_ms_ = reply.remaining_ms;
  next_send_ = now + PollInterval();
  if (!renewed) {
    if (!logged_waiting_) {
      logged_waiting_ = true;
      LogInfo(
          "the consumer name's lease is held by another instance; waiting to see whether it "
          "is renewed",
          {{"subscription", options_.subscription},
           {"consumer", options_.consumer},
           {"holder", reply.holder},
           {"remaining_ms", reply.remaining_ms}});
    }
    return Step::kNothing;
  }
  if (options_.wait_for_name) {
    if (!logged_live_) {
      logged_live_ = true;
      LogWarn("a live process holds the consumer name; waiting for it (consumer.wait_for_name)",
              {{"subscription", options_.subscription},
               {"consumer", options_.consumer},
               {"holder", reply.holder}});
    }
    return Step::kNothing;
  }
  lost_ = true;
  stop_reason_ = Status(StatusCode::kFatal,
                        Describe() + " is held by a live process, instance \"" + reply.holder +
                            "\" (it renews its lease): give each process its own consumer.name, "
                            "or set consumer.wait_for_name: true to wait for it");
  return Step::kStop;
}

}  // namespace streamcar::runtime
