#include "sidecar/redis/group_info.h"

#include "sidecar/common/text.h"
#include "sidecar/redis/connection.h"

namespace streamcar::redis {
namespace {

Status Unexpected(std::string_view command) {
  return Status(StatusCode::kProtocol, "unexpected reply to " + std::string(command));
}

// A flat [key, value, key, value, ...] reply's value for `key` (nil view when absent).
ReplyView Field(const ReplyView& map, std::string_view key) {
  for (size_t i = 0; i + 1 < map.Size(); i += 2) {
    if (map[i].Str() == key) return map[i + 1];
  }
  return ReplyView(nullptr);
}

}  // namespace

Command TypeOf(std::string_view key) { return std::move(Command("TYPE").Arg(key)); }

StatusOr<std::string> ParseType(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsString()) return Unexpected("TYPE");
  return std::string(reply.Str());
}

Status CheckDeadLetterType(std::string_view subscription, std::string_view key,
                           std::string_view type) {
  if (type == "stream" || type == "none") return Status::Ok();
  return Status(StatusCode::kFatal,
                "subscription " + std::string(subscription) + ": dead_letter.stream key \"" +
                    std::string(key) + "\" exists and is a " + std::string(type) +
                    ", not a stream (WRONGTYPE); streamcar leaves it untouched: fix the key or "
                    "the configuration");
}

Command HasAckDel() { return std::move(Command("COMMAND").Arg("INFO").Arg("XACKDEL")); }

StatusOr<bool> ParseHasAckDel(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray()) return Unexpected("COMMAND INFO");
  ReplyView first = reply[0];
  return first.IsArray() && first.Size() > 0;
}

Command GroupsOf(std::string_view stream) {
  return std::move(Command("XINFO").Arg("GROUPS").Arg(stream));
}

StatusOr<int64_t> ParseGroupCount(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray()) return Unexpected("XINFO GROUPS");
  return static_cast<int64_t>(reply.Size());
}

StatusOr<GroupInfo> ParseGroupInfo(const ReplyView& reply, std::string_view group) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray()) return Unexpected("XINFO GROUPS");
  GroupInfo info;
  for (size_t i = 0; i < reply.Size(); ++i) {
    ReplyView row = reply[i];
    if (Field(row, "name").Str() != group) continue;
    info.found = true;
    info.pending = Field(row, "pending").Integer();
    info.last_delivered_id = std::string(Field(row, "last-delivered-id").Str());
    if (ReplyView lag = Field(row, "lag"); lag.IsInteger()) info.lag = lag.Integer();
  }
  return info;
}

Command PendingSummary(std::string_view stream, std::string_view group) {
  return std::move(Command("XPENDING").Arg(stream).Arg(group));
}

StatusOr<int64_t> ParsePendingCount(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray() || !reply[0].IsInteger()) return Unexpected("XPENDING");
  return reply[0].Integer();
}

StatusOr<PendingOldest> ParsePendingOldest(const ReplyView& reply) {
  auto count = ParsePendingCount(reply);
  if (!count.ok()) return count.status();
  PendingOldest oldest{*count, std::nullopt};
  if (*count == 0) return oldest;
  if (reply.Size() < 2 || !reply[1].IsString()) return Unexpected("XPENDING");
  auto id = ParseEntryId(reply[1].Str());
  if (!id) return Unexpected("XPENDING");
  oldest.oldest_ms = id->ms;
  return oldest;
}

Command LagCount(std::string_view stream, std::string_view last_delivered_id, int64_t cap) {
  return std::move(Command("XRANGE")
                       .Arg(stream)
                       .Arg("(" + std::string(last_delivered_id))
                       .Arg("+")
                       .Arg("COUNT")
                       .Arg(cap));
}

StatusOr<int64_t> ParseLagCount(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray()) return Unexpected("XRANGE");
  return static_cast<int64_t>(reply.Size());
}

bool NeedsLagCount(const GroupInfo& info) {
  return info.found && !info.lag && !info.last_delivered_id.empty();
}

Lag LagOf(const GroupInfo& info, std::optional<int64_t> counted) {
  if (info.lag) return {info.lag, true};
  return {counted, false};
}

}  // namespace streamcar::redis
