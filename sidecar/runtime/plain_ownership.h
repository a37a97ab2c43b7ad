#pragma once
// The ownership of a plain subscription (runtime/ownership.h): its consumer owns what it reads
// in its group, and a peer's entries once they have been idle for claim.min_idle (SPEC 3.2). Its
// steps are the plain ones (redis::PlainOps) and its source is PlainIntake. What a loop uses when
// SubscriptionDeps names no ownership.

#include <memory>
#include <optional>
#include <string>

#include "sidecar/runtime/ownership.h"

namespace streamcar::runtime {

class PlainOwnership final : public Ownership {
 public:
  // The one instance: it holds nothing.
  static const PlainOwnership& Instance();

  std::unique_ptr<redis::SubscriptionOps> MakeOps(const config::Subscription& sub,
                                                  const std::string& consumer) const override;
  std::unique_ptr<EntrySource> MakeSource(SourceParts parts) const override;
  std::string LoopNameSuffix() const override { return ""; }
  bool OneLaneWithoutKeyField() const override { return false; }
  bool MayReapConsumers() const override { return true; }
  bool ReportsProgress() const override { return false; }
  std::optional<delivery::ShardStamp> RequestStamp() const override { return std::nullopt; }
  // Never called: plain steps are never refused for want of ownership.
  void Lost(int64_t /*installed*/, std::string_view /*op*/) const override {}
};

}  // namespace streamcar::runtime
