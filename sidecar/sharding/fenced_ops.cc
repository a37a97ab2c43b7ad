#include "sidecar/sharding/fenced_ops.h"

#include <charconv>

#include "sidecar/keys/sharding_keys.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/dead_letter_record.h"
#include "sidecar/sharding/fenced_script.h"

namespace streamcar::sharding {

FencedShardOps::FencedShardOps(const std::string& shard_key, const std::string& group,
                               std::string consumer, int64_t token, std::string member_id,
                               int64_t member_epoch)
    : plain_(shard_key, group, std::move(consumer)),
      fence_key_(keys::FenceKey(shard_key, group)),
      dead_letter_key_(keys::ShardDeadLetterKey(shard_key)),
      token_(token),
      member_id_(std::move(member_id)),
      member_epoch_(member_epoch) {}

redis::Command FencedShardOps::Call(const redis::Script& script, std::string_view extra_key) const {
  redis::Command command = extra_key.empty() ? script.Call({stream(), fence_key_})
                                             : script.Call({stream(), extra_key, fence_key_});
  command.Arg(token_);
  return command;
}

redis::Command FencedShardOps::WithIds(const redis::Script& script,
                                       std::span<const std::string> ids) const {
  redis::Command command = Call(script);
  command.Arg(group()).Arg(consumer());
  for (const std::string& id : ids) command.Arg(id);
  return command;
}

std::span<const redis::Script* const> FencedShardOps::Scripts() const { return FencedScripts(); }

redis::Command FencedShardOps::EnsureGroup(std::string_view start_id) const {
  redis::Command command = Call(FencedInstallScript());
  command.Arg(group()).Arg(member_id_).Arg(member_epoch_).Arg(start_id);
  return command;
}

Status FencedShardOps::ParseEnsureGroup(const redis::ReplyView& reply) const {
  if (!reply.IsError()) return Status::Ok();
  Status status = redis::ErrorOf(reply);
  if (status.IsServerError("WRONGTYPE")) {
    return Status(StatusCode::kFatal, "key \"" + stream() +
                                          "\" exists and is not a stream (WRONGTYPE); streamcar "
                                          "leaves it untouched: fix the key or the configuration");
  }
  return status;  // STALE (FencedBy), or another refusal
}

redis::Command FencedShardOps::ReadNew(int count, Millis /*block*/) const {
  redis::Command command = Call(FencedReadScript());
  command.Arg(group()).Arg(consumer()).Arg(int64_t{count}).Arg(">");
  return command;
}

redis::Command FencedShardOps::ReadOwnPending(std::string_view cursor, int count) const {
  redis::Command command = Call(FencedTakeoverScript());
  command.Arg(group()).Arg(consumer()).Arg(int64_t{count}).Arg(cursor);
  return command;
}

redis::Command FencedShardOps::AutoClaim(Millis /*min_idle*/, std::string_view cursor,
                                         int count) const {
  redis::Command command = Call(FencedClaimAllScript());
  command.Arg(group()).Arg(consumer()).Arg(cursor).Arg(int64_t{count});
  return command;
}

std::vector<redis::Command> FencedShardOps::DeliveryCounts(
    std::span<const StreamEntry> entries) const {
  return plain_.DeliveryCounts(entries);
}

redis::Command FencedShardOps::OwnPendingIds(std::string_view start, int count) const {
  return plain_.OwnPendingIds(start, count);
}

std::vector<redis::Command> FencedShardOps::Fetch(std::span<const std::string> ids) const {
  return plain_.Fetch(ids);
}

redis::CommandGroup FencedShardOps::Ack(std::span<const std::string> ids,
                                        redis::AckMode mode) const {
  redis::Command command = Call(FencedAckScript());
  command.Arg(group()).Arg(redis::AckModeArg(mode));
  for (const std::string& id : ids) command.Arg(id);
  redis::CommandGroup group_of_one;
  group_of_one.commands.push_back(std::move(command));
  return group_of_one;
}

redis::Command FencedShardOps::RetryClaim(std::span<const std::string> ids) const {
  return WithIds(FencedRetryClaimScript(), ids);
}

redis::Command FencedShardOps::KeepAlive(std::span<const std::string> ids) const {
  return WithIds(FencedKeepAliveScript(), ids);
}

redis::Command FencedShardOps::DeadLetter(const redis::DeadLetterTarget& dlq,
                                          const StreamEntry& entry,
                                          const redis::DeadLetterMeta& meta,
                                          redis::AckMode mode) const {
  redis::Command command = Call(FencedDeadLetterScript(), dlq.stream);
  command.Arg(group()).Arg(consumer()).Arg(entry.id).Arg(redis::AckModeArg(mode));
  command.Arg(dlq.max_len);
  redis::AppendDeadLetterFields(stream(), group(), entry, meta, &command);
  return command;
}

redis::Command FencedShardOps::OwnedAck(std::string_view id, redis::AckMode mode) const {
  redis::Command command = Call(FencedOwnedAckScript());
  command.Arg(group()).Arg(consumer()).Arg(id).Arg(redis::AckModeArg(mode));
  return command;
}

redis::Command FencedShardOps::UndoReads(std::span<const std::string> ids) const {
  return WithIds(FencedUndoReadsScript(), ids);
}

std::vector<redis::Command> FencedShardOps::WatchFence() const {
  std::vector<redis::Command> commands;
  // A WATCH left from a check that was refused, or whose transaction never came, would make
  // this read's EXEC run nothing once more for a write it already saw: start clean.
  commands.emplace_back("UNWATCH");
  commands.push_back(std::move(redis::Command("WATCH").Arg(fence_key_)));
  commands.push_back(std::move(redis::Command("HGET").Arg(fence_key_).Arg("token")));
  // Opened here, not with the read: a read sent behind a MULTI that was refused (an ACL without
  // +multi) would run on its own, unchecked.
  commands.emplace_back("MULTI");
  return commands;
}

FencedShardOps::FenceCheck FencedShardOps::CheckFence(std::span<const redis::Reply> replies) const {
  FenceCheck check;
  if (replies.size() != 4) {
    check.status =
        Status(StatusCode::kProtocol,
               "the fence check got " + std::to_string(replies.size()) + " replies, not 4");
    return check;
  }
  // Open: MULTI was accepted, or one is still open from an earlier round (its close refused):
  // either way the caller closes it.
  check.in_transaction =
      !replies[3].IsError() ||
      replies[3].view().Str().find("can not be nested") != std::string_view::npos;
  for (const redis::Reply& reply : replies) {
    if (reply.IsError()) {
      check.status = redis::ErrorOf(reply.view());
      return check;
    }
  }
  const redis::ReplyView token = replies[2].view();
  // No fence installed reads as token 0, as in the scripts.
  const std::string installed = token.IsNil() ? "0" : std::string(token.Str());
  if (installed != std::to_string(token_)) {
    check.status = Status(StatusCode::kServerError, "FENCED " + installed);
  }
  return check;
}

std::vector<redis::Command> FencedShardOps::ReadWatched(int count) const {
  std::vector<redis::Command> commands;
  commands.push_back(std::move(redis::Command("XREADGROUP")
                                   .Arg("GROUP")
                                   .Arg(group())
                                   .Arg(consumer())
                                   .Arg("COUNT")
                                   .Arg(int64_t{count})
                                   .Arg("STREAMS")
                                   .Arg(stream())
                                   .Arg(">")));
  commands.push_back(std::move(
      redis::Command("XREVRANGE").Arg(stream()).Arg("+").Arg("-").Arg("COUNT").Arg(int64_t{1})));
  commands.emplace_back("EXEC");
  return commands;
}

redis::Command FencedShardOps::CloseTransaction() {
  // EXEC, not DISCARD: nothing is queued after MULTI, so it runs nothing (and unwatches), and it
  // is a command the read needs anyway, where DISCARD would be one more ACL rule to get right.
  return redis::Command("EXEC");
}

StatusOr<std::optional<FencedRead>> FencedShardOps::ParseWatchedRead(
    std::span<const redis::Reply> replies) {
  if (replies.size() != 3) {
    return Status(StatusCode::kProtocol,
                  "the fenced read got " + std::to_string(replies.size()) + " replies, not 3");
  }
  // Each queued command's QUEUED, or the refusal that aborts the transaction.
  for (size_t i = 0; i < 2; ++i) {
    if (replies[i].IsError()) return redis::ErrorOf(replies[i].view());
  }
  const redis::ReplyView exec = replies[2].view();
  if (exec.IsError()) return redis::ErrorOf(exec);
  if (exec.IsNil()) return std::optional<FencedRead>();  // the fence key was written: not run
  if (!exec.IsArray() || exec.Size() != 2) {
    return Status(StatusCode::kProtocol, "the fenced read's EXEC did not answer two replies");
  }
  if (exec[0].IsError()) return redis::ErrorOf(exec[0]);
  FencedRead read;
  if (!exec[0].IsNil()) {
    auto entries = SubscriptionOps::ParseRead(exec[0]);
    if (!entries.ok()) return entries.status();
    read.entries = std::move(*entries);
  }
  if (!read.entries.empty()) return std::optional<FencedRead>(std::move(read));
  const redis::ReplyView tail = exec[1];
  if (tail.IsError()) return redis::ErrorOf(tail);
  read.tail_id = tail.IsArray() && tail.Size() > 0 ? std::string(tail[0][0].Str()) : "0-0";
  return std::optional<FencedRead>(std::move(read));
}

redis::Command FencedShardOps::WaitForNew(std::string_view tail_id, Millis block) const {
  redis::Command command("XREAD");
  command.Arg("COUNT").Arg(int64_t{1}).Arg("BLOCK").Arg(static_cast<int64_t>(block.count()));
  command.Arg("STREAMS").Arg(stream()).Arg(tail_id);
  return command;
}

StatusOr<FencedRead> FencedShardOps::ParseFencedRead(const redis::ReplyView& reply) {
  if (reply.IsError()) return redis::ErrorOf(reply);
  FencedRead read;
  if (reply.IsString()) {
    read.tail_id = std::string(reply.Str());
    return read;
  }
  auto entries = SubscriptionOps::ParseRead(reply);
  if (!entries.ok()) return entries.status();
  read.entries = std::move(*entries);
  return read;
}

std::optional<int64_t> FencedShardOps::FencedBy(const Status& status) {
  if (!status.IsServerError("FENCED") && !status.IsServerError("STALE")) return std::nullopt;
  const std::string& message = status.message();
  const size_t space = message.rfind(' ');
  if (space == std::string::npos) return std::nullopt;
  int64_t token = 0;
  const char* begin = message.data() + space + 1;
  const char* end = message.data() + message.size();
  const auto [at, error] = std::from_chars(begin, end, token);
  if (error != std::errc() || at != end) return std::nullopt;
  return token;
}

}  // namespace streamcar::sharding
