#pragma once
// The ownership a shard's loop gets (runtime/ownership.h): this member holds one shard of a
// sharded subscription under a grant of the coordinator (SHARDING.md B5, B7), the grant's fence
// token guarding every step. Its steps are the fenced ones (sharding/fenced_ops.h), its source
// reads behind the fence (sharding/fenced_intake.h), and its start-up drain is the takeover.
// Built by the member (sharding/sharded_subscription.h) for each grant, and handed to the
// shard's loop in SubscriptionDeps.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sidecar/runtime/ownership.h"

namespace streamcar::sharding {

class ShardOwnership final : public runtime::Ownership {
 public:
  // What the coordinator granted this member.
  struct Grant {
    int shard = 0;
    int64_t token = 0;  // the fence token
    std::string member_id;
    int64_t member_epoch = 0;
  };
  // What the member hears of the shard's loop, on that loop's thread.
  struct Callbacks {
    // The takeover is done (the fence installed, the shard's whole pending list claimed): the
    // shard is ACTIVE (SHARDING.md B7). Once.
    std::function<void()> takeover_done;
    // The fence refused a step `op` (read, ack, claim, retry, dead_letter or install: the labels
    // of streamcar_fenced_ops_total) because a newer owner installed `installed`. The loop then
    // reads, delivers and settles nothing more; its owner ends it. Once.
    std::function<void(int64_t installed, std::string_view op)> fenced;
  };

  ShardOwnership(Grant grant, Callbacks callbacks);

  const Grant& grant() const { return grant_; }

  std::unique_ptr<redis::SubscriptionOps> MakeOps(const config::Subscription& sub,
                                                  const std::string& consumer) const override;
  // A FencedIntake; `parts.ops` are what MakeOps made. Its drain's end is the takeover's.
  std::unique_ptr<runtime::EntrySource> MakeSource(runtime::SourceParts parts) const override;
  std::string LoopNameSuffix() const override;
  // One request in flight per shard (B8), or one per key with ordering.key_field.
  bool OneLaneWithoutKeyField() const override { return true; }
  bool MayReapConsumers() const override { return false; }
  // The member sends them in its heartbeats (status, C2).
  bool ReportsProgress() const override { return true; }
  std::optional<delivery::ShardStamp> RequestStamp() const override;
  void Lost(int64_t installed, std::string_view op) const override;

 private:
  Grant grant_;
  Callbacks callbacks_;
};

}  // namespace streamcar::sharding
