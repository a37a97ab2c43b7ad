#include "sidecar/runtime/intake.h"

#include <utility>

#include "sidecar/common/log.h"

namespace streamcar::runtime {

std::string_view Name(IntakeSource source) {
  switch (source) {
    case IntakeSource::kDrain:
      return "drain";
    case IntakeSource::kNew:
      return "new";
    case IntakeSource::kReclaim:
      return "reclaim";
    case IntakeSource::kRecover:
      return "recover";
  }
  return "unknown";
}

Intake::Intake(std::string subscription, delivery::OutcomePolicy policy, EntryLedger* ledger,
               IntakeSettlement settlement, AttemptObserver* observer, const Clock& clock)
    : subscription_(std::move(subscription)),
      policy_(std::move(policy)),
      ledger_(ledger),
      settlement_(std::move(settlement)),
      observer_(observer),
      clock_(clock) {}

redis::DeadLetterMeta Intake::ExhaustedMeta(int attempts, int64_t time_ms) {
  return {std::string(delivery::Name(delivery::DeadLetterReason::kMaxAttempts)), "none",
          "delivered " + std::to_string(attempts - 1) +
              " times without an outcome (a consumer stopped during each)",
          attempts, time_ms};
}

size_t Intake::Route(std::vector<StreamEntry> entries, IntakeSource source) {
  std::vector<StreamEntry> deliverable;
  deliverable.reserve(entries.size());
  size_t deleted = 0;
  for (auto& entry : entries) {
    if (entry.deleted) {
      std::string id = entry.id;
      if (ledger_->AdmitForAck(entry.id) == 0) continue;  // held already
      ++deleted;
      settlement_.acknowledge(std::move(id));
      continue;
    }
    if (delivery::ExhaustedOnArrival(policy_, entry.attempts)) {
      std::string id = entry.id;
      redis::DeadLetterMeta meta = ExhaustedMeta(entry.attempts, clock_.WallMillis());
      if (ledger_->AdmitForDeadLetter(std::move(entry)) == 0) continue;  // held already
      settlement_.dead_letter(std::move(id), std::move(meta));
      continue;
    }
    deliverable.push_back(std::move(entry));
  }
  const size_t admitted = ledger_->Admit(std::move(deliverable));
  if (source == IntakeSource::kReclaim && admitted > 0) {
    LogInfo("reclaimed idle entries",
            {{"subscription", subscription_}, {"count", static_cast<int64_t>(admitted)}});
  }
  observer_->OnRouted(source, admitted, deleted);
  return admitted;
}

}  // namespace streamcar::runtime
