#include "sidecar/runtime/delivery_gates.h"

#include <algorithm>

namespace streamcar::runtime {

bool DeliveryGates::Open(SteadyTime now) const {
  return std::all_of(gates_.begin(), gates_.end(),
                     [now](const auto& gate) { return gate->StateAt(now).open; });
}

bool DeliveryGates::Claim(SteadyTime now) {
  return std::all_of(gates_.begin(), gates_.end(),
                     [now](const auto& gate) { return gate->Claim(now); });
}

void DeliveryGates::OnSent(SteadyTime now) {
  for (const auto& gate : gates_) gate->OnSent(now);
}

void DeliveryGates::OnAnswer(const delivery::HandlerResponse& response, SteadyTime now) {
  for (const auto& gate : gates_) gate->OnAnswer(response, now);
}

void DeliveryGates::OnHeldBack(SteadyTime now) {
  for (const auto& gate : gates_) {
    if (!gate->StateAt(now).open) gate->OnHeldBack(now);
  }
}

EntryLedger::Pause DeliveryGates::PauseAt(SteadyTime now) const {
  EntryLedger::Pause pause;
  for (const auto& gate : gates_) {
    const GateState state = gate->StateAt(now);
    if (state.reads == GateState::Reads::kGoOn) {
      if (!state.open) {
        pause.delivery_until =
            std::max(pause.delivery_until, state.reopens_at.value_or(SteadyTime::max()));
      }
      continue;
    }
    if (state.reads == GateState::Reads::kWaitWhileHeld) pause.reads_wait_while_held = true;
    if (!state.open)
      pause.until = std::max(pause.until, state.reopens_at.value_or(SteadyTime::max()));
  }
  return pause;
}

}  // namespace streamcar::runtime
