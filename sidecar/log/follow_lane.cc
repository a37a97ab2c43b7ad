#include "sidecar/log/follow_lane.h"

#include <charconv>

namespace streamcar::log {

LaneErrorKind LaneErrorKindOf(const Status& status, redis::Redirect* redirect) {
  if (status.code() != StatusCode::kServerError) return LaneErrorKind::kNone;
  const std::string& text = status.message();
  const std::string_view word = std::string_view(text).substr(0, text.find(' '));
  if (word == "MOVED") {
    // "MOVED <slot> <endpoint>:<port>"
    const size_t slot_end = text.find(' ', word.size() + 1);
    if (slot_end == std::string::npos) return LaneErrorKind::kNodeFailed;
    const std::string slot_text = text.substr(word.size() + 1, slot_end - word.size() - 1);
    auto to = keys::ParseRedirectEndpoint(std::string_view(text).substr(slot_end + 1));
    if (!to || slot_text.empty() || slot_text.size() > 5 ||
        slot_text.find_first_not_of("0123456789") != std::string::npos) {
      return LaneErrorKind::kNodeFailed;
    }
    int slot = 0;
    std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), slot);
    redirect->slot = slot;
    redirect->to = *to;
    return LaneErrorKind::kMoved;
  }
  // ASK: the slot is migrating and this lane's key already left; the migration ends with a
  // MOVED. TRYAGAIN, LOADING: transient on this node.
  if (word == "ASK" || word == "TRYAGAIN" || word == "LOADING") return LaneErrorKind::kWait;
  if (word == "CLUSTERDOWN" || word == "MASTERDOWN" || word == "READONLY" || word == "UNBLOCKED") {
    return LaneErrorKind::kNodeFailed;
  }
  return LaneErrorKind::kNone;
}

SlotSessions::SlotSessions(redis::ConnectionOptions options)
    : options_(std::move(options)), topology_(options_.topology.get()) {}

Status SlotSessions::Target(int slot, LaneConnection& connection, const std::string& role) {
  if (topology_ == nullptr) {
    if (connection.session == nullptr) {
      redis::ConnectionOptions options = options_;
      options.client_name = "streamcar-" + role;
      connection.session = std::make_unique<redis::Session>(options, role, &health_);
    }
    return Status::Ok();
  }
  const uint64_t version = topology_->version();
  if (connection.session != nullptr && connection.topology_version == version) {
    return Status::Ok();
  }
  auto master = topology_->MasterFor(slot);
  if (!master.ok()) return master.status();
  connection.topology_version = version;
  if (connection.session != nullptr && connection.node == *master) return Status::Ok();
  redis::ConnectionOptions options = topology_->OptionsFor(*master);
  options.client_name = "streamcar-" + role;
  connection.session = std::make_unique<redis::Session>(options, role, &health_);
  connection.node = *master;
  connection.id_generation = 0;
  return Status::Ok();
}

void SlotSessions::Retarget(LaneConnection& connection, std::string_view why) {
  if (topology_ != nullptr && connection.node) topology_->OnNodeFailed(*connection.node, why);
  if (topology_ != nullptr) connection.session.reset();
}

bool SlotSessions::AfterFailure(LaneConnection& connection, const Status& status) {
  if (topology_ == nullptr) return false;
  redis::Redirect redirect;
  switch (LaneErrorKindOf(status, &redirect)) {
    case LaneErrorKind::kMoved:
      if (connection.node) topology_->OnMoved(redirect, *connection.node);
      connection.session.reset();
      return true;
    case LaneErrorKind::kNodeFailed:
      Retarget(connection, status.message());
      return true;
    case LaneErrorKind::kWait:
      return false;
    case LaneErrorKind::kNone:
      if (status.code() == StatusCode::kServerError) return false;
      Retarget(connection, status.message());  // lost, refused, timed out
      return true;
  }
  return false;
}

}  // namespace streamcar::log
