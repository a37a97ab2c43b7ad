#include "sidecar/redis/sync_ops.h"

#include "sidecar/redis/settle_scripts.h"

namespace streamcar::redis::sync {
namespace {

// Runs `command` and parses its one reply with `parse`.
template <typename Parse>
auto RunParsed(Session& session, const Command& command, const Parse& parse)
    -> decltype(parse(ReplyView())) {
  auto reply = RunCommand(session, command);
  if (!reply.ok()) return reply.status();
  return parse(reply->view());
}

template <typename Parse>
auto RunScriptParsed(Session& session, const Command& command, const Parse& parse)
    -> decltype(parse(ReplyView())) {
  auto reply = RunScript(session, command, SettleScripts());
  if (!reply.ok()) return reply.status();
  return parse(reply->view());
}

}  // namespace

StatusOr<Reply> RunCommand(Session& session, const Command& command) {
  auto replies = session.RunPipeline({command});
  if (!replies.ok()) return replies.status();
  if (replies->size() != 1) return Status(StatusCode::kProtocol, "expected one reply");
  return std::move(replies->front());
}

StatusOr<std::vector<Reply>> RunCommands(Session& session, const std::vector<Command>& commands) {
  if (commands.empty()) return std::vector<Reply>{};
  return session.RunPipeline(commands);
}

StatusOr<Reply> RunScript(Session& session, const Command& command,
                          std::span<const Script* const> scripts) {
  auto reply = RunCommand(session, command);
  if (!reply.ok() || !IsNoScript(reply->view())) return reply;
  std::vector<Command> loads;
  for (const Script* script : scripts) loads.push_back(script->Load());
  auto loaded = RunCommands(session, loads);
  if (!loaded.ok()) return loaded.status();
  for (const Reply& load : *loaded) {
    if (load.IsError()) return ErrorOf(load.view());
  }
  return RunCommand(session, command);
}

Status EnsureGroup(Session& session, const SubscriptionOps& ops, std::string_view start_id) {
  auto reply = RunCommand(session, ops.EnsureGroup(start_id));
  if (!reply.ok()) return reply.status();
  return ops.ParseEnsureGroup(reply->view());
}

StatusOr<std::vector<StreamEntry>> ReadNew(Session& session, const SubscriptionOps& ops, int count,
                                           Millis block) {
  // Blocking: the socket deadline is set above the server-side block (DESIGN.md trap 5). An
  // error reply is a Status here already, which is what ParseRead makes of it too.
  auto reply = session.RunBlocking(ops.ReadNew(count, block), block);
  if (!reply.ok()) return reply.status();
  return SubscriptionOps::ParseRead(reply->view());
}

Status FillDeliveryCounts(Session& session, const SubscriptionOps& ops,
                          std::vector<StreamEntry>* entries) {
  if (entries->empty()) return Status::Ok();
  auto replies = RunCommands(session, ops.DeliveryCounts(*entries));
  if (!replies.ok()) return replies.status();
  return SubscriptionOps::ApplyDeliveryCounts(*replies, entries);
}

StatusOr<std::vector<StreamEntry>> ReadOwnPending(Session& session, const SubscriptionOps& ops,
                                                  std::string_view cursor, int count) {
  auto entries = RunParsed(session, ops.ReadOwnPending(cursor, count), SubscriptionOps::ParseRead);
  if (!entries.ok()) return entries;
  if (Status s = FillDeliveryCounts(session, ops, &*entries); !s.ok()) return s;
  return entries;
}

StatusOr<AutoClaimReply> AutoClaim(Session& session, const SubscriptionOps& ops, Millis min_idle,
                                   std::string_view cursor, int count) {
  auto result =
      RunParsed(session, ops.AutoClaim(min_idle, cursor, count), SubscriptionOps::ParseAutoClaim);
  if (!result.ok()) return result;
  if (Status s = FillDeliveryCounts(session, ops, &result->entries); !s.ok()) return s;
  return result;
}

StatusOr<PendingIds> OwnPendingIds(Session& session, const SubscriptionOps& ops,
                                   std::string_view start, int count) {
  return RunParsed(session, ops.OwnPendingIds(start, count), SubscriptionOps::ParsePendingIds);
}

StatusOr<std::vector<StreamEntry>> Fetch(Session& session, const SubscriptionOps& ops,
                                         std::span<const std::string> ids) {
  auto replies = RunCommands(session, ops.Fetch(ids));
  if (!replies.ok()) return replies.status();
  return SubscriptionOps::ParseFetch(*replies, ids);
}

Status Ack(Session& session, const SubscriptionOps& ops, std::span<const std::string> ids,
           AckMode mode) {
  auto replies = RunCommands(session, ops.Ack(ids, mode).commands);
  if (!replies.ok()) return replies.status();
  return SubscriptionOps::ParseAck(*replies);
}

StatusOr<RetryClaimReply> RetryClaim(Session& session, const SubscriptionOps& ops,
                                     std::span<const std::string> ids) {
  return RunScriptParsed(session, ops.RetryClaim(ids), SubscriptionOps::ParseRetryClaim);
}

StatusOr<std::vector<std::string>> KeepAlive(Session& session, const SubscriptionOps& ops,
                                             std::span<const std::string> ids) {
  return RunScriptParsed(session, ops.KeepAlive(ids), SubscriptionOps::ParseIds);
}

StatusOr<DeadLetterResult> DeadLetter(Session& session, const SubscriptionOps& ops,
                                      const DeadLetterTarget& dlq, const StreamEntry& entry,
                                      const DeadLetterMeta& meta, AckMode mode) {
  return RunScriptParsed(session, ops.DeadLetter(dlq, entry, meta, mode),
                         SubscriptionOps::ParseDeadLetter);
}

StatusOr<int64_t> UndoReads(Session& session, const SubscriptionOps& ops,
                            std::span<const std::string> ids) {
  return RunScriptParsed(session, ops.UndoReads(ids), SubscriptionOps::ParseCount);
}

StatusOr<std::string> TypeOf(Session& session, std::string_view key) {
  return RunParsed(session, redis::TypeOf(key), ParseType);
}

StatusOr<bool> HasAckDel(Session& session) {
  return RunParsed(session, redis::HasAckDel(), ParseHasAckDel);
}

StatusOr<int64_t> GroupCount(Session& session, std::string_view stream) {
  return RunParsed(session, GroupsOf(stream), ParseGroupCount);
}

StatusOr<GroupInfo> Info(Session& session, std::string_view stream, std::string_view group) {
  auto replies = RunCommands(session, {PendingSummary(stream, group), GroupsOf(stream)});
  if (!replies.ok()) return replies.status();
  auto pending = ParsePendingCount((*replies)[0].view());
  if (!pending.ok()) return pending.status();
  auto info = ParseGroupInfo((*replies)[1].view(), group);
  if (!info.ok()) return info;
  info->pending = *pending;
  return info;
}

StatusOr<int64_t> LagCount(Session& session, std::string_view stream,
                           std::string_view last_delivered_id, int64_t cap) {
  return RunParsed(session, redis::LagCount(stream, last_delivered_id, cap), ParseLagCount);
}

}  // namespace streamcar::redis::sync
