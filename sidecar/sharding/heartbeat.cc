#include "sidecar/sharding/heartbeat.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>

#include "sidecar/redis/connection.h"
#include "sidecar/sharding/heartbeat_script.h"

namespace streamcar::sharding {
namespace {

constexpr std::array<std::pair<HeartbeatStatus, std::string_view>, 7> kStatusNames = {{
    {HeartbeatStatus::kOk, "OK"},
    {HeartbeatStatus::kRevokePending, "REVOKE_PENDING"},
    {HeartbeatStatus::kSyncMetadata, "SYNC_METADATA"},
    {HeartbeatStatus::kFencedMemberEpoch, "FENCED_MEMBER_EPOCH"},
    {HeartbeatStatus::kUnknownMemberId, "UNKNOWN_MEMBER_ID"},
    {HeartbeatStatus::kUnreleasedInstanceId, "UNRELEASED_INSTANCE_ID"},
    {HeartbeatStatus::kInvalidRequest, "INVALID_REQUEST"},
}};

// The reply's length: the eleven fields of SHARDING.md B4, then the group's figures, then this
// member's stalled shards (B6.1).
constexpr size_t kReplyFields = 16;

Status Malformed(std::string_view what) {
  return {StatusCode::kProtocol, "the coordinator's heartbeat reply: " + std::string(what)};
}

template <typename T>
std::string JoinList(const std::vector<T>& items, auto&& format) {
  std::string out;
  for (const T& item : items) {
    if (!out.empty()) out += ',';
    out += format(item);
  }
  return out;
}

bool ParseInt(std::string_view text, int64_t* value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && end == text.data() + text.size();
}

// "3:1742,5:1743" or "9,12": each comma-separated item, split at its ':' when `with_token`.
bool ParseShardList(std::string_view text, bool with_token, std::vector<ShardGrant>* out) {
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t colon = item.find(':');
    if (with_token != (colon != std::string_view::npos)) return false;
    int64_t shard = 0;
    int64_t token = 0;
    if (!ParseInt(item.substr(0, colon), &shard) || shard < 0) return false;
    if (with_token && (!ParseInt(item.substr(colon + 1), &token) || token <= 0)) return false;
    out->push_back({static_cast<int>(shard), token});
  }
  return true;
}

}  // namespace

std::string_view HeartbeatStatusName(HeartbeatStatus status) {
  for (const auto& [value, name] : kStatusNames) {
    if (value == status) return name;
  }
  return "?";
}

redis::Command HeartbeatCommand(const keys::CoordinatorKeys& keys,
                                const HeartbeatRequest& request) {
  redis::Command command = HeartbeatScript().Call(keys.InOrder());
  command.Arg(request.member_id).Arg(request.member_epoch).Arg(request.instance_id);
  command.Arg(JoinList(request.owned, [](int shard) { return std::to_string(shard); }));
  command.Arg(JoinList(request.revoking, [](const std::pair<int, RevokeState>& item) {
    return std::to_string(item.first) +
           (item.second == RevokeState::kRevoked ? ":REVOKED" : ":DRAINING");
  }));
  command.Arg(JoinList(request.fence_conflicts, [](const std::pair<int, int64_t>& item) {
    return std::to_string(item.first) + ":" + std::to_string(item.second);
  }));
  command.Arg(request.metadata_version).Arg(request.shard_count);
  command.Arg(request.session_timeout.count()).Arg(request.rebalance_timeout.count());
  command.Arg(request.initial_delay.count()).Arg(request.min_assignment_interval.count());
  command.Arg(request.heartbeat_interval.count());
  command.Arg(kProtocolVersion).Arg(kSchemaVersion);
  // Entry ids hold no ':' or ','; an id that did would only fail the script's own check.
  command.Arg(JoinList(request.progress, [](const ShardProgress& item) {
    return std::to_string(item.shard) + ":" + item.last_acked_id + ":" +
           std::to_string(item.in_flight) + ":" + std::to_string(item.pending) + ":" +
           (item.acked_ago ? std::to_string(item.acked_ago->count()) : "") + ":" +
           std::to_string(item.waiting);
  }));
  command.Arg(request.static_takeover_wait ? "wait" : "immediate");
  command.Arg(request.pod).Arg(request.host);
  command.Arg(
      JoinList(std::vector(request.fenced_ops.begin(), request.fenced_ops.end()),
               [](const auto& item) { return item.first + ":" + std::to_string(item.second); }));
  command.Arg(request.stall_timeout.count()).Arg(request.revoke_stalled ? "1" : "0");
  return command;
}

std::optional<ProgressRow> ParseProgressRow(std::string_view row) {
  // member|last acked id|in flight|pending|reported ms|acked ms|waiting|busy ms|stalled ms
  // (sharding/lua/heartbeat.lua, step 5b)
  std::vector<std::string_view> parts;
  for (size_t start = 0; start <= row.size();) {
    const size_t bar = std::min(row.find('|', start), row.size());
    parts.push_back(row.substr(start, bar - start));
    start = bar + 1;
  }
  // Five parts: a row of a version that did not report the acknowledgement's time; six: nor what
  // waits.
  if (parts.size() != 5 && parts.size() != 6 && parts.size() != 9) return std::nullopt;
  ProgressRow out{.member = std::string(parts[0]), .last_acked_id = std::string(parts[1])};
  if (!ParseInt(parts[2], &out.in_flight) || !ParseInt(parts[3], &out.pending) ||
      !ParseInt(parts[4], &out.reported_ms)) {
    return std::nullopt;
  }
  if (parts.size() >= 6 && !parts[5].empty()) {
    int64_t acked = 0;
    if (!ParseInt(parts[5], &acked)) return std::nullopt;
    out.acked_ms = acked;
  }
  if (parts.size() == 9) {
    if (!ParseInt(parts[6], &out.waiting)) return std::nullopt;
    for (auto [part, field] : {std::pair{parts[7], &out.busy_ms}, {parts[8], &out.stalled_ms}}) {
      int64_t ms = 0;
      if (part.empty()) continue;
      if (!ParseInt(part, &ms)) return std::nullopt;
      *field = ms;
    }
  }
  return out;
}

StatusOr<HeartbeatReply> ParseHeartbeatReply(const redis::ReplyView& reply) {
  if (reply.IsError()) return redis::ErrorOf(reply);
  if (!reply.IsArray() || reply.Size() != kReplyFields) return Malformed("not 16 fields");
  for (size_t i = 1; i < kReplyFields; ++i) {
    const bool text = (i >= 8 && i <= 10) || i == 15;  // assigned, pending, detail, stalled
    if (text ? !reply[i].IsString() : !reply[i].IsInteger()) {
      return Malformed("field " + std::to_string(i + 1) + " has the wrong type");
    }
  }
  HeartbeatReply out;
  bool known = false;
  for (const auto& [value, name] : kStatusNames) {
    if (reply[0].Str() == name) {
      out.status = value;
      known = true;
    }
  }
  if (!known) return Malformed("unknown status \"" + std::string(reply[0].Str()) + "\"");
  out.member_epoch = reply[1].Integer();
  out.group_epoch = reply[2].Integer();
  out.assignment_epoch = reply[3].Integer();
  out.metadata_version = reply[4].Integer();
  out.heartbeat_interval = Millis(reply[5].Integer());
  out.session_timeout = Millis(reply[6].Integer());
  out.rebalance_timeout = Millis(reply[7].Integer());
  if (!ParseShardList(reply[8].Str(), true, &out.assigned)) return Malformed("assigned shards");
  std::vector<ShardGrant> pending;
  if (!ParseShardList(reply[9].Str(), false, &pending)) return Malformed("pending shards");
  for (const ShardGrant& item : pending) out.pending.push_back(item.shard);
  out.detail = std::string(reply[10].Str());
  out.members = reply[11].Integer();
  out.unowned_shards = reply[12].Integer();
  out.unowned_oldest = Millis(reply[13].Integer());
  out.target_computations = reply[14].Integer();
  std::vector<ShardGrant> stalled;
  if (!ParseShardList(reply[15].Str(), false, &stalled)) return Malformed("stalled shards");
  for (const ShardGrant& item : stalled) out.stalled.push_back(item.shard);
  return out;
}

}  // namespace streamcar::sharding
