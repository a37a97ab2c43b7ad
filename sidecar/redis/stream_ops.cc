#include "sidecar/redis/stream_ops.h"

#include <string_view>
#include <unordered_map>

#include "sidecar/redis/connection.h"
#include "sidecar/redis/settle_scripts.h"
#include "sidecar/redis/sync_ops.h"

namespace streamcar::redis {
namespace {

Status Unexpected(std::string_view command) {
  return Status(StatusCode::kProtocol, "unexpected reply to " + std::string(command));
}

}  // namespace

std::string_view AckModeArg(AckMode mode) {
  switch (mode) {
    case AckMode::kAckOnly:
      return "ack";
    case AckMode::kAckDel:
      return "ackdel";
    case AckMode::kAckThenDelete:
      return "ackxdel";
  }
  return "ack";
}

// --- parsers ---------------------------------------------------------------------------------

std::vector<StreamEntry> SubscriptionOps::ParseEntries(const ReplyView& list) {
  std::vector<StreamEntry> entries;
  entries.reserve(list.Size());
  for (size_t i = 0; i < list.Size(); ++i) {
    ReplyView item = list[i];
    if (!item.IsArray() || item.Size() < 1) continue;  // Redis 6.2 XCLAIM: nil for a deleted id
    StreamEntry entry;
    entry.id = std::string(item[0].Str());
    ReplyView fields = item[1];
    if (fields.IsNil() || !fields.IsArray()) {
      entry.deleted = true;
    } else {
      entry.fields.reserve(fields.Size() / 2);
      for (size_t k = 0; k + 1 < fields.Size(); k += 2) {
        entry.fields.emplace_back(std::string(fields[k].Str()), std::string(fields[k + 1].Str()));
      }
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

StatusOr<std::vector<StreamEntry>> SubscriptionOps::ParseRead(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (reply.IsNil()) return std::vector<StreamEntry>{};  // BLOCK ran out, or nothing pending
  if (!reply.IsArray()) return Unexpected("XREADGROUP");
  // [[stream, entries]]: one stream was asked for.
  return ParseEntries(reply[0][1]);
}

StatusOr<AutoClaimReply> SubscriptionOps::ParseAutoClaim(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray() || reply.Size() < 2 || !reply[0].IsString()) {
    return Unexpected("XAUTOCLAIM");
  }
  AutoClaimReply result;
  result.next_cursor = std::string(reply[0].Str());
  for (auto& entry : ParseEntries(reply[1])) {
    if (entry.deleted) {
      result.deleted_ids.push_back(std::move(entry.id));  // Redis 6.2 reports them inline
    } else {
      result.entries.push_back(std::move(entry));
    }
  }
  ReplyView deleted = reply[2];  // Redis 7: the ids it removed from the PEL
  for (size_t i = 0; i < deleted.Size(); ++i) result.deleted_ids.emplace_back(deleted[i].Str());
  return result;
}

Status SubscriptionOps::ApplyDeliveryCounts(std::span<const Reply> replies,
                                            std::vector<StreamEntry>* entries) {
  if (replies.size() != entries->size()) {
    return Status(StatusCode::kProtocol, "delivery counts: " + std::to_string(replies.size()) +
                                             " replies for " + std::to_string(entries->size()) +
                                             " entries");
  }
  for (size_t i = 0; i < replies.size(); ++i) {
    ReplyView reply = replies[i].view();
    if (reply.IsError()) return ErrorOf(reply);
    ReplyView row = reply[0];  // [id, consumer, idle, count], or none: not ours any more
    StreamEntry& entry = (*entries)[i];
    entry.attempts = row[0].Str() == entry.id && row[3].IsInteger()
                         ? static_cast<int>(row[3].Integer())
                         : 1;  // acknowledged or claimed meanwhile: keep the best lower bound
  }
  return Status::Ok();
}

StatusOr<PendingIds> SubscriptionOps::ParsePendingIds(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray()) return Unexpected("XPENDING");
  PendingIds ids;
  ids.reserve(reply.Size());
  for (size_t i = 0; i < reply.Size(); ++i) {
    ids.emplace_back(std::string(reply[i][0].Str()), static_cast<int>(reply[i][3].Integer()));
  }
  return ids;
}

StatusOr<std::vector<StreamEntry>> SubscriptionOps::ParseFetch(std::span<const Reply> replies,
                                                               std::span<const std::string> ids) {
  if (replies.size() != ids.size()) {
    return Status(StatusCode::kProtocol, "fetch: " + std::to_string(replies.size()) +
                                             " replies for " + std::to_string(ids.size()) + " ids");
  }
  std::vector<StreamEntry> entries;
  entries.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ReplyView reply = replies[i].view();
    if (reply.IsError()) return ErrorOf(reply);
    auto found = ParseEntries(reply);
    if (found.empty() || found.front().id != ids[i]) {
      StreamEntry gone;
      gone.id = ids[i];
      gone.deleted = true;
      entries.push_back(std::move(gone));
    } else {
      entries.push_back(std::move(found.front()));
    }
  }
  return entries;
}

Status SubscriptionOps::ParseAck(std::span<const Reply> replies) {
  // A refusal while queueing, EXECABORT, or a command that failed inside EXEC.
  for (const Reply& reply : replies) {
    ReplyView view = reply.view();
    if (view.IsError()) return ErrorOf(view);
    for (size_t k = 0; k < view.Size(); ++k) {
      if (view[k].IsError()) return ErrorOf(view[k]);
    }
  }
  return Status::Ok();
}

StatusOr<RetryClaimReply> SubscriptionOps::ParseRetryClaim(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray() || reply.Size() < 2 || reply.Size() > 3) {
    return Unexpected("the retry claim script");
  }
  RetryClaimReply result;
  result.entries = ParseEntries(reply[0]);
  auto lost = ParseIds(reply[1]);
  if (!lost.ok()) return lost.status();
  result.lost_ids = std::move(*lost);
  for (auto& entry : result.entries) entry.attempts = 0;  // unknown unless the reply says
  if (reply.Size() == 3 && reply[2].IsArray()) {          // {id, count, ...}
    std::unordered_map<std::string_view, int> counts;
    for (size_t i = 0; i + 1 < reply[2].Size(); i += 2) {
      counts[reply[2][i].Str()] = static_cast<int>(reply[2][i + 1].Integer());
    }
    for (auto& entry : result.entries) {
      const auto found = counts.find(entry.id);
      if (found != counts.end()) entry.attempts = found->second;
    }
  }
  return result;
}

StatusOr<std::vector<std::string>> SubscriptionOps::ParseIds(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray()) return Unexpected("the keepalive script");
  std::vector<std::string> ids;
  ids.reserve(reply.Size());
  for (size_t i = 0; i < reply.Size(); ++i) ids.emplace_back(reply[i].Str());
  return ids;
}

StatusOr<DeadLetterResult> SubscriptionOps::ParseDeadLetter(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (reply.IsInteger() && reply.Integer() == 1) return DeadLetterResult::kWritten;
  if (reply.IsInteger() && reply.Integer() == 0) return DeadLetterResult::kNotOurs;
  return Unexpected("the dead-letter script");
}

StatusOr<int64_t> SubscriptionOps::ParseCount(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsInteger()) return Unexpected("the undo-reads script");
  return reply.Integer();
}

StatusOr<bool> SubscriptionOps::ParseOwnedAck(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (reply.IsInteger() && (reply.Integer() == 0 || reply.Integer() == 1)) {
    return reply.Integer() == 1;
  }
  return Unexpected("the owned-ack script");
}

StatusOr<bool> SubscriptionOps::ParseStillOurs(const ReplyView& reply, std::string_view id) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray()) return Unexpected("XPENDING");
  // [[id, consumer, idle, count]] when pending for the consumer asked about, else [].
  return reply.Size() > 0 && reply[0][0].Str() == id;
}

// --- PlainOps builders -----------------------------------------------------------------------

std::span<const Script* const> PlainOps::Scripts() const { return SettleScripts(); }

Command PlainOps::EnsureGroup(std::string_view start_id) const {
  Command command("XGROUP");
  command.Arg("CREATE").Arg(stream_).Arg(group_).Arg(start_id).Arg("MKSTREAM");
  return command;
}

Status PlainOps::ParseEnsureGroup(const ReplyView& reply) const {
  if (!reply.IsError()) return Status::Ok();
  Status status = ErrorOf(reply);
  if (status.IsServerError("BUSYGROUP")) return Status::Ok();
  if (status.IsServerError("WRONGTYPE")) {
    return Status(StatusCode::kFatal, "key \"" + stream_ +
                                          "\" exists and is not a stream (WRONGTYPE); streamcar "
                                          "leaves it untouched: fix the key or the configuration");
  }
  return Status(StatusCode::kServerError, "cannot create group \"" + group_ + "\" on stream \"" +
                                              stream_ + "\": " + status.message());
}

Command PlainOps::ReadNew(int count, Millis block) const {
  Command command("XREADGROUP");
  command.Arg("GROUP").Arg(group_).Arg(consumer_).Arg("COUNT").Arg(int64_t{count});
  command.Arg("BLOCK").Arg(static_cast<int64_t>(block.count()));
  command.Arg("STREAMS").Arg(stream_).Arg(">");
  return command;
}

Command PlainOps::ReadOwnPending(std::string_view cursor, int count) const {
  Command command("XREADGROUP");
  command.Arg("GROUP").Arg(group_).Arg(consumer_).Arg("COUNT").Arg(int64_t{count});
  command.Arg("STREAMS").Arg(stream_).Arg(cursor);
  return command;
}

Command PlainOps::AutoClaim(Millis min_idle, std::string_view cursor, int count) const {
  Command command("XAUTOCLAIM");
  command.Arg(stream_).Arg(group_).Arg(consumer_).Arg(static_cast<int64_t>(min_idle.count()));
  command.Arg(cursor).Arg("COUNT").Arg(int64_t{count});
  return command;
}

std::vector<Command> PlainOps::DeliveryCounts(std::span<const StreamEntry> entries) const {
  std::vector<Command> commands;
  commands.reserve(entries.size());
  for (const auto& entry : entries) {
    Command command("XPENDING");
    command.Arg(stream_).Arg(group_).Arg(entry.id).Arg(entry.id).Arg(int64_t{1}).Arg(consumer_);
    commands.push_back(std::move(command));
  }
  return commands;
}

Command PlainOps::OwnPendingIds(std::string_view start, int count) const {
  Command command("XPENDING");
  command.Arg(stream_).Arg(group_).Arg(start).Arg("+").Arg(int64_t{count}).Arg(consumer_);
  return command;
}

std::vector<Command> PlainOps::Fetch(std::span<const std::string> ids) const {
  std::vector<Command> commands;
  commands.reserve(ids.size());
  for (const auto& id : ids) {
    Command command("XRANGE");
    command.Arg(stream_).Arg(id).Arg(id);
    commands.push_back(std::move(command));
  }
  return commands;
}

CommandGroup PlainOps::Ack(std::span<const std::string> ids, AckMode mode) const {
  Command ack("XACK");
  ack.Arg(stream_).Arg(group_);
  CommandGroup group;
  switch (mode) {
    case AckMode::kAckOnly:
      for (const auto& id : ids) ack.Arg(id);
      group.commands.push_back(std::move(ack));
      break;
    case AckMode::kAckDel: {
      Command ackdel("XACKDEL");
      ackdel.Arg(stream_).Arg(group_).Arg("ACKED").Arg("IDS");
      ackdel.Arg(static_cast<int64_t>(ids.size()));
      for (const auto& id : ids) ackdel.Arg(id);
      group.commands.push_back(std::move(ackdel));
      break;
    }
    case AckMode::kAckThenDelete: {
      // XACK and XDEL together or not at all.
      Command del("XDEL");
      del.Arg(stream_);
      for (const auto& id : ids) {
        ack.Arg(id);
        del.Arg(id);
      }
      group.commands.emplace_back("MULTI");
      group.commands.push_back(std::move(ack));
      group.commands.push_back(std::move(del));
      group.commands.emplace_back("EXEC");
      break;
    }
  }
  return group;
}

Command PlainOps::WithIds(const Script& script, std::span<const std::string> ids) const {
  Command command = script.Call({stream_});
  command.Arg(group_).Arg(consumer_);
  for (const auto& id : ids) command.Arg(id);
  return command;
}

Command PlainOps::RetryClaim(std::span<const std::string> ids) const {
  return WithIds(RetryClaimScript(), ids);
}

Command PlainOps::KeepAlive(std::span<const std::string> ids) const {
  return WithIds(KeepAliveScript(), ids);
}

Command PlainOps::DeadLetter(const DeadLetterTarget& dlq, const StreamEntry& entry,
                             const DeadLetterMeta& meta, AckMode mode) const {
  Command command = DeadLetterScript().Call({stream_, dlq.stream});
  command.Arg(group_).Arg(consumer_).Arg(entry.id).Arg(AckModeArg(mode)).Arg(dlq.max_len);
  AppendDeadLetterFields(stream_, group_, entry, meta, &command);
  return command;
}

Command PlainOps::OwnedAck(std::string_view id, AckMode mode) const {
  Command command = OwnedAckScript().Call({stream_});
  command.Arg(group_).Arg(consumer_).Arg(id).Arg(AckModeArg(mode));
  return command;
}

Command PlainOps::UndoReads(std::span<const std::string> ids) const {
  return WithIds(UndoReadsScript(), ids);
}

std::unique_ptr<SubscriptionOps> MakePlainOps(std::string stream, std::string group,
                                              std::string consumer) {
  return std::make_unique<PlainOps>(std::move(stream), std::move(group), std::move(consumer));
}

}  // namespace streamcar::redis
