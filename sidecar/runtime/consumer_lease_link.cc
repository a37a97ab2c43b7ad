#include "sidecar/runtime/consumer_lease_link.h"

#include <algorithm>
#include <utility>

#include "sidecar/keys/stream_keys.h"

namespace streamcar::runtime {

ConsumerLeaseLink::ConsumerLeaseLink(EventLoop& loop, redis::AsyncConnection* connection,
                                     ConsumerLease::Options options, Millis timeout,
                                     Callbacks callbacks)
    : loop_(loop),
      connection_(connection),
      lease_(std::move(options)),
      timeout_(timeout),
      callbacks_(std::move(callbacks)),
      timer_(loop.CreateTimer([this] { Send(); })) {}

std::unique_ptr<ConsumerLeaseLink> ConsumerLeaseLink::ForSubscription(
    EventLoop& loop, redis::AsyncConnection* connection, const config::Subscription& sub,
    const std::string& consumer, const SubscriptionDeps& deps, Callbacks callbacks) {
  if (!deps.consumer_lease) return nullptr;
  ConsumerLease::Options options{keys::ConsumerLeaseKey(sub.stream, sub.group, consumer),
                                 *deps.consumer_lease,
                                 deps.tuning.consumer_lease,
                                 deps.wait_for_name,
                                 sub.name,
                                 sub.stream,
                                 sub.group,
                                 consumer};
  return std::make_unique<ConsumerLeaseLink>(loop, connection, std::move(options),
                                             deps.redis.command_timeout, std::move(callbacks));
}

void ConsumerLeaseLink::Send() {
  if (ended_ || (stopping_ && !lease_.held())) return;
  if (!connection_->ready()) return;  // Send again from the connection's OnReady
  const SteadyTime now = loop_.clock().Now();
  if (auto command = lease_.TakeDue(now)) {
    connection_->Send(std::move(*command), timeout_,
                      [this](StatusOr<redis::Reply> reply) { OnReply(reply); });
    return;
  }
  if (auto at = lease_.NextSendAt()) timer_->ArmAt(std::max(*at, now));
}

void ConsumerLeaseLink::OnReply(const StatusOr<redis::Reply>& reply) {
  if (ended_) return;
  switch (lease_.OnReply(reply, loop_.clock().Now())) {
    case ConsumerLease::Step::kStop:
      ended_ = true;
      timer_->Cancel();
      callbacks_.lost(lease_.stop_reason());
      return;
    case ConsumerLease::Step::kAcquired:
      if (!stopping_) callbacks_.acquired();
      break;
    case ConsumerLease::Step::kNothing:
      break;
  }
  Send();
  callbacks_.changed();
}

void ConsumerLeaseLink::Release(std::function<void()> done) {
  std::optional<redis::Command> release;
  if (!ended_ && connection_->ready()) release = lease_.Release();
  ended_ = true;
  timer_->Cancel();
  if (!release) return done();
  connection_->Send(std::move(*release), timeout_,
                    [done = std::move(done)](const StatusOr<redis::Reply>& /*reply*/) { done(); });
}

}  // namespace streamcar::runtime
