#include "sidecar/runtime/plain_ownership.h"

#include "sidecar/runtime/plain_intake.h"

namespace streamcar::runtime {

const PlainOwnership& PlainOwnership::Instance() {
  static const PlainOwnership instance;
  return instance;
}

std::unique_ptr<redis::SubscriptionOps> PlainOwnership::MakeOps(const config::Subscription& sub,
                                                                const std::string& consumer) const {
  return redis::MakePlainOps(sub.stream, sub.group, consumer);
}

std::unique_ptr<EntrySource> PlainOwnership::MakeSource(SourceParts parts) const {
  ConsumerReaper* reaper = parts.reaper;
  auto source = std::make_unique<PlainIntake>(std::move(parts));
  if (reaper != nullptr) source->UseReaper(reaper);
  return source;
}

}  // namespace streamcar::runtime
