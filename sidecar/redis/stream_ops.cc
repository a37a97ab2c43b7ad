#include "sidecar/redis/stream_ops.h"

#include "sidecar/redis/settle_scripts.h"

namespace streamcar::redis {
namespace {

std::string ToStringId(std::string_view id) { return std::string(id); }

}  // namespace

Status StreamOps::EnsureGroup(Session& session, const std::string& start_id) const {
  auto reply = session.Run(
      Command("XGROUP").Arg("CREATE").Arg(stream_).Arg(group_).Arg(start_id).Arg("MKSTREAM"));
  if (reply.ok() || reply.status().IsServerError("BUSYGROUP")) return Status::Ok();
  if (reply.status().IsServerError("WRONGTYPE")) {
    return Status(StatusCode::kFatal, "key \"" + stream_ +
                                          "\" exists and is not a stream (WRONGTYPE); streamcar "
                                          "leaves it untouched: fix the key or the configuration");
  }
  if (reply.status().code() == StatusCode::kServerError) {
    return Status(StatusCode::kServerError, "cannot create group \"" + group_ + "\" on stream \"" +
                                                stream_ + "\": " + reply.status().message());
  }
  return reply.status();
}

std::vector<StreamEntry> StreamOps::ParseEntries(const ReplyView& list) {
  std::vector<StreamEntry> entries;
  entries.reserve(list.Size());
  for (size_t i = 0; i < list.Size(); ++i) {
    ReplyView item = list[i];
    if (!item.IsArray() || item.Size() < 1) continue;  // Redis 6.2 XCLAIM: nil for a deleted id
    StreamEntry entry;
    entry.id = ToStringId(item[0].Str());
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

StatusOr<std::map<std::string, int>> StreamOps::DeliveryCounts(Session& session,
                                                               const std::string& first,
                                                               const std::string& last,
                                                               int count) const {
  auto reply = session.Run(Command("XPENDING")
                               .Arg(stream_)
                               .Arg(group_)
                               .Arg(first)
                               .Arg(last)
                               .Arg(int64_t{count})
                               .Arg(consumer_));
  if (!reply.ok()) return reply.status();
  std::map<std::string, int> counts;
  ReplyView list = reply->view();
  for (size_t i = 0; i < list.Size(); ++i) {
    ReplyView row = list[i];
    counts[std::string(row[0].Str())] = static_cast<int>(row[3].Integer());
  }
  return counts;
}

Status StreamOps::FillAttempts(Session& session, std::vector<StreamEntry>* entries) const {
  if (entries->empty()) return Status::Ok();
  auto counts = DeliveryCounts(session, entries->front().id, entries->back().id,
                               static_cast<int>(entries->size()) + 1024);
  if (!counts.ok()) return counts.status();
  for (auto& entry : *entries) {
    auto it = counts->find(entry.id);
    // Not in our PEL any more (acknowledged or claimed meanwhile): keep the best lower bound.
    entry.attempts = it != counts->end() ? it->second : 1;
  }
  return Status::Ok();
}

StatusOr<std::vector<StreamEntry>> StreamOps::ReadOwnPending(Session& session,
                                                             const std::string& cursor,
                                                             int count) const {
  auto reply = session.Run(Command("XREADGROUP")
                               .Arg("GROUP")
                               .Arg(group_)
                               .Arg(consumer_)
                               .Arg("COUNT")
                               .Arg(int64_t{count})
                               .Arg("STREAMS")
                               .Arg(stream_)
                               .Arg(cursor));
  if (!reply.ok()) return reply.status();
  std::vector<StreamEntry> entries;
  if (reply->IsNil()) return entries;
  entries = ParseEntries(reply->view()[0][1]);
  if (auto s = FillAttempts(session, &entries); !s.ok()) return s;
  return entries;
}

StatusOr<std::vector<StreamEntry>> StreamOps::ReadNew(Session& session, int count,
                                                      Millis block) const {
  auto reply = session.RunBlocking(Command("XREADGROUP")
                                       .Arg("GROUP")
                                       .Arg(group_)
                                       .Arg(consumer_)
                                       .Arg("COUNT")
                                       .Arg(int64_t{count})
                                       .Arg("BLOCK")
                                       .Arg(static_cast<int64_t>(block.count()))
                                       .Arg("STREAMS")
                                       .Arg(stream_)
                                       .Arg(">"),
                                   block);
  if (!reply.ok()) return reply.status();
  if (reply->IsNil()) return std::vector<StreamEntry>{};
  return ParseEntries(reply->view()[0][1]);
}

StatusOr<AutoClaimResult> StreamOps::AutoClaim(Session& session, Millis min_idle,
                                               const std::string& cursor, int count) const {
  auto reply = session.Run(Command("XAUTOCLAIM")
                               .Arg(stream_)
                               .Arg(group_)
                               .Arg(consumer_)
                               .Arg(static_cast<int64_t>(min_idle.count()))
                               .Arg(cursor)
                               .Arg("COUNT")
                               .Arg(int64_t{count}));
  if (!reply.ok()) return reply.status();
  AutoClaimResult result;
  ReplyView view = reply->view();
  result.next_cursor = std::string(view[0].Str());
  for (auto& entry : ParseEntries(view[1])) {
    if (entry.deleted) {
      result.deleted_ids.push_back(entry.id);  // Redis 6.2 reports them inline
    } else {
      result.entries.push_back(std::move(entry));
    }
  }
  ReplyView deleted = view[2];  // Redis 7: the ids it removed from the PEL
  for (size_t i = 0; i < deleted.Size(); ++i) result.deleted_ids.emplace_back(deleted[i].Str());
  if (auto s = FillAttempts(session, &result.entries); !s.ok()) return s;
  return result;
}

Command StreamOps::Ack(const std::vector<std::string>& ids) const {
  Command command("XACK");
  command.Arg(stream_).Arg(group_);
  for (const auto& id : ids) command.Arg(id);
  return command;
}

Command StreamOps::Delete(const std::vector<std::string>& ids) const {
  Command command("XDEL");
  command.Arg(stream_);
  for (const auto& id : ids) command.Arg(id);
  return command;
}

Command StreamOps::AckDelete(const std::vector<std::string>& ids) const {
  Command command("XACKDEL");
  command.Arg(stream_).Arg(group_).Arg("ACKED").Arg("IDS").Arg(static_cast<int64_t>(ids.size()));
  for (const auto& id : ids) command.Arg(id);
  return command;
}

const std::vector<const Script*>& StreamOps::Scripts() {
  static const std::vector<const Script*> scripts(SettleScripts().begin(), SettleScripts().end());
  return scripts;
}

namespace {

Command WithIds(Command command, const std::string& group, const std::string& consumer,
                const std::vector<std::string>& ids) {
  command.Arg(group).Arg(consumer);
  for (const auto& id : ids) command.Arg(id);
  return command;
}

}  // namespace

Command StreamOps::ClaimForRetry(const std::vector<std::string>& ids) const {
  return WithIds(RetryClaimScript().Call({stream_}), group_, consumer_, ids);
}

RetryClaimReply StreamOps::ParseRetryClaim(const ReplyView& reply) {
  RetryClaimReply result;
  result.entries = ParseEntries(reply[0]);
  result.lost_ids = ParseIds(reply[1]);
  return result;
}

Command StreamOps::KeepAlive(const std::vector<std::string>& ids) const {
  return WithIds(KeepAliveScript().Call({stream_}), group_, consumer_, ids);
}

std::vector<std::string> StreamOps::ParseIds(const ReplyView& reply) {
  std::vector<std::string> ids;
  ids.reserve(reply.Size());
  for (size_t i = 0; i < reply.Size(); ++i) ids.emplace_back(reply[i].Str());
  return ids;
}

Command StreamOps::DeadLetter(const std::string& dlq_stream, int64_t dlq_max_len,
                              const StreamEntry& entry, const DeadLetterMeta& meta,
                              AckMode ack_mode) const {
  const char* mode = "ack";
  if (ack_mode == AckMode::kAckDel) mode = "ackdel";
  if (ack_mode == AckMode::kAckThenDelete) mode = "ackxdel";
  Command command = DeadLetterScript().Call({stream_, dlq_stream});
  command.Arg(group_).Arg(consumer_).Arg(entry.id).Arg(mode).Arg(dlq_max_len);
  AppendDeadLetterFields(stream_, group_, entry, meta, &command);
  return command;
}

Command StreamOps::UndoReads(const std::vector<std::string>& ids) const {
  return WithIds(UndoReadsScript().Call({stream_}), group_, consumer_, ids);
}

StatusOr<std::vector<std::pair<std::string, int>>> StreamOps::OwnPendingIds(
    Session& session, const std::string& start, int count) const {
  auto reply = session.Run(Command("XPENDING")
                               .Arg(stream_)
                               .Arg(group_)
                               .Arg(start)
                               .Arg("+")
                               .Arg(int64_t{count})
                               .Arg(consumer_));
  if (!reply.ok()) return reply.status();
  std::vector<std::pair<std::string, int>> ids;
  ReplyView list = reply->view();
  ids.reserve(list.Size());
  for (size_t i = 0; i < list.Size(); ++i) {
    ids.emplace_back(std::string(list[i][0].Str()), static_cast<int>(list[i][3].Integer()));
  }
  return ids;
}

StatusOr<std::vector<StreamEntry>> StreamOps::Fetch(Session& session,
                                                    const std::vector<std::string>& ids) const {
  std::vector<Command> commands;
  commands.reserve(ids.size());
  for (const auto& id : ids) commands.push_back(Command("XRANGE").Arg(stream_).Arg(id).Arg(id));
  auto replies = session.RunPipeline(commands);
  if (!replies.ok()) return replies.status();
  std::vector<StreamEntry> entries;
  entries.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const Reply& reply = (*replies)[i];
    if (reply.IsError()) return ErrorOf(reply.view());
    auto found = ParseEntries(reply.view());
    if (found.empty()) {
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

StatusOr<GroupInfo> StreamOps::Info(Session& session) const {
  auto replies = session.RunPipeline(
      {Command("XPENDING").Arg(stream_).Arg(group_), Command("XINFO").Arg("GROUPS").Arg(stream_)});
  if (!replies.ok()) return replies.status();
  if ((*replies)[0].IsError()) return ErrorOf((*replies)[0].view());
  if ((*replies)[1].IsError()) return ErrorOf((*replies)[1].view());
  GroupInfo info;
  info.pending = (*replies)[0][0].Integer();
  ReplyView groups = (*replies)[1].view();
  for (size_t i = 0; i < groups.Size(); ++i) {
    ReplyView group = groups[i];
    std::string_view name;
    for (size_t k = 0; k + 1 < group.Size(); k += 2) {
      if (group[k].Str() == "name") name = group[k + 1].Str();
    }
    if (name != group_) continue;
    for (size_t k = 0; k + 1 < group.Size(); k += 2) {
      auto key = group[k].Str();
      if (key == "lag" && group[k + 1].IsInteger()) info.lag = group[k + 1].Integer();
      if (key == "last-delivered-id") info.last_delivered_id = std::string(group[k + 1].Str());
    }
  }
  return info;
}

StatusOr<int64_t> StreamOps::CountAfter(Session& session, const std::string& last_delivered_id,
                                        int64_t cap) const {
  auto reply = session.Run(
      Command("XRANGE").Arg(stream_).Arg("(" + last_delivered_id).Arg("+").Arg("COUNT").Arg(cap));
  if (!reply.ok()) return reply.status();
  return static_cast<int64_t>(reply->view().Size());
}

StatusOr<bool> StreamOps::HasAckDel(Session& session) {
  auto reply = session.Run(Command("COMMAND").Arg("INFO").Arg("XACKDEL"));
  if (!reply.ok()) return reply.status();
  ReplyView first = reply->view()[0];
  return first.IsArray() && first.Size() > 0;
}

StatusOr<int64_t> StreamOps::GroupCount(Session& session) const {
  auto reply = session.Run(Command("XINFO").Arg("GROUPS").Arg(stream_));
  if (!reply.ok()) return reply.status();
  return static_cast<int64_t>(reply->view().Size());
}

}  // namespace streamcar::redis
