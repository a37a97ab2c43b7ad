#include "sidecar/runtime/settle_refusal.h"

namespace streamcar::runtime {
namespace {

std::string_view RefusedOpOf(SettlePlan::Step step) {
  switch (step) {
    case SettlePlan::Step::kDeadLetter:
    case SettlePlan::Step::kDeadLetterWrite:
      return "dead_letter";
    case SettlePlan::Step::kRetryClaim:
      return "retry";
    case SettlePlan::Step::kKeepAlive:
      return "claim";
    case SettlePlan::Step::kUndoReads:
      return "read";
    default:
      return "ack";
  }
}

}  // namespace

std::optional<RefusedStep> RefusedIn(const redis::SubscriptionOps& ops, const SettlePlan& plan,
                                     const redis::BatchResult& result) {
  for (size_t i = 0; i < result.replies.size(); ++i) {
    const redis::Reply& reply = result.replies[i];
    if (!reply.view().IsError()) continue;
    auto installed = ops.RefusedOwnership(redis::ErrorOf(reply.view()));
    if (!installed) continue;
    std::string_view op = "ack";
    for (const auto& span : plan.spans) {
      if (i >= span.begin && i < span.end) op = RefusedOpOf(span.step);
    }
    return RefusedStep{*installed, op};
  }
  return std::nullopt;
}

}  // namespace streamcar::runtime
