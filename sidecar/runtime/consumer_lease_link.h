#pragma once
// Drives a subscription's consumer-name lease (consumer_lease.h, SPEC 4.7) on its loop: sends
// each take and renewal when it falls due on the subscription's command connection (the stream's
// slot, where the key lives; never behind a BLOCK read), and tells the loop what the answers
// mean. The loop asks lease() before each settlement plan; the gate (consumer_lease_gate.h) asks
// it before each POST.
//
// Loop thread only. The connection outlives the link.

#include <functional>
#include <memory>

#include "sidecar/common/event_loop.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/redis/async_connection.h"
#include "sidecar/runtime/consumer_lease.h"
#include "sidecar/runtime/subscription_loop.h"

namespace streamcar::runtime {

class ConsumerLeaseLink {
 public:
  struct Callbacks {
    std::function<void()> acquired;           // taken the first time: intake may start
    std::function<void(const Status&)> lost;  // stop: exit 1 with this (once)
    std::function<void()> changed;            // an answer came: the gate may have opened
  };

  ConsumerLeaseLink(EventLoop& loop, redis::AsyncConnection* connection,
                    ConsumerLease::Options options, Millis timeout, Callbacks callbacks);
  // The link of subscription `sub`'s consumer `consumer` as `deps` say (identity, expiry,
  // consumer.wait_for_name), on `connection`; null when deps.consumer_lease is unset (a shard).
  static std::unique_ptr<ConsumerLeaseLink> ForSubscription(
      EventLoop& loop, redis::AsyncConnection* connection, const config::Subscription& sub,
      const std::string& consumer, const SubscriptionDeps& deps, Callbacks callbacks);

  const ConsumerLease& lease() const { return lease_; }
  // Sends what is due now, else arms the timer for it. At start and whenever the connection is
  // ready again (a take or renewal that met a closed connection waits for it).
  void Send();
  // The loop is stopping: a name never held is not asked for any more; a held one is renewed
  // until Release, so that the drain's acknowledgements go out under it.
  void Stop() { stopping_ = true; }
  // The last step of a clean stop: removes the lease if it is still this process's (a restarted
  // or replacing process takes the name at once), then `done`; at once when there is nothing to
  // release or no connection to do it on.
  void Release(std::function<void()> done);

 private:
  void OnReply(const StatusOr<redis::Reply>& reply);

  EventLoop& loop_;
  redis::AsyncConnection* connection_;
  ConsumerLease lease_;
  const Millis timeout_;
  Callbacks callbacks_;
  std::unique_ptr<EventLoop::Timer> timer_;
  bool stopping_ = false;
  bool ended_ = false;  // lost, or released
};

}  // namespace streamcar::runtime
