#include "sidecar/runtime/refused_connect_gate.h"

#include <algorithm>
#include <utility>

#include "sidecar/common/log.h"
#include "sidecar/config/redis_url.h"

namespace streamcar::runtime {

RefusedConnectGate::RefusedConnectGate(std::string subscription, const std::string& url)
    : subscription_(std::move(subscription)), url_(config::MaskUrlPassword(url)) {}

GateState RefusedConnectGate::StateAt(SteadyTime now) const {
  if (!down_) return GateState::Open();
  if (now < paused_until_) {
    return GateState::ClosedUntil(paused_until_, GateState::Reads::kWaitWhileHeld);
  }
  // The pause is over: the next POST tries the handler, but nothing new is read for it yet.
  return {true, std::nullopt, GateState::Reads::kWaitWhileHeld};
}

void RefusedConnectGate::OnAnswer(const delivery::HandlerResponse& response, SteadyTime now) {
  if (response.kind != delivery::HandlerResponse::Kind::kRefused) {
    if (streak_.failures() > 0) {
      LogInfo("handler is answering again", {{"subscription", subscription_}});
    }
    streak_.Succeeded();
    down_ = false;
    paused_until_ = SteadyTime{};
    return;
  }
  const Millis pause = streak_.Failed();
  down_ = true;
  // Requests refused together each extend the pause from their own answer, never shorten it.
  paused_until_ = std::max(paused_until_, now + pause);
  LogWarn("handler refused the connection; delivery paused, no attempt spent",
          {{"subscription", subscription_},
           {"url", url_},
           {"error", response.error},
           {"retry_in_ms", static_cast<int64_t>(pause.count())}});
}

}  // namespace streamcar::runtime
