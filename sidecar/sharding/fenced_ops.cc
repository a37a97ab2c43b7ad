#include "sidecar/sharding/fenced_ops.h"

#include "sidecar/redis/connection.h"
#include "sidecar/sharding/fenced_script.h"
#include "sidecar/sharding/sharding_keys.h"

namespace streamcar::sharding {
namespace {

Status Unexpected(std::string_view op) {
  return {StatusCode::kProtocol, "unexpected reply to the fenced " + std::string(op)};
}

// The common shape {'OK' | 'FENCED' | 'STALE' | 'EMPTY', value}: a refusal fills
// installed_instead; anything else hands the value to `parse`.
template <typename T, typename Parse>
StatusOr<Fenced<T>> ParseFenced(const redis::ReplyView& reply, std::string_view op, Parse&& parse) {
  if (reply.IsError()) return redis::ErrorOf(reply);
  if (!reply.IsArray() || reply.Size() != 2 || !reply[0].IsString()) return Unexpected(op);
  Fenced<T> out;
  const std::string_view kind = reply[0].Str();
  if (kind == "FENCED" || kind == "STALE") {
    if (!reply[1].IsInteger()) return Unexpected(op);
    out.installed_instead = reply[1].Integer();
    return out;
  }
  if (Status parsed = parse(kind, reply[1], &out.value); !parsed.ok()) return parsed;
  return out;
}

}  // namespace

FencedOps::FencedOps(std::string shard_key, std::string group, std::string consumer)
    : shard_key_(std::move(shard_key)),
      fence_key_(FenceKey(shard_key_, group)),
      dead_letter_key_(ShardDeadLetterKey(shard_key_)),
      group_(std::move(group)),
      consumer_(std::move(consumer)) {}

redis::Command FencedOps::Call(std::string_view op, int64_t token) const {
  redis::Command command = FencedScript().Call({shard_key_, fence_key_, dead_letter_key_});
  command.Arg(op).Arg(token).Arg(group_);
  return command;
}

redis::Command FencedOps::Install(int64_t token, std::string_view member, int64_t member_epoch,
                                  std::string_view start_id) const {
  redis::Command command = Call("install", token);
  command.Arg(member).Arg(member_epoch).Arg(start_id);
  return command;
}

redis::Command FencedOps::ClaimAll(int64_t token, std::string_view cursor, int count) const {
  redis::Command command = Call("claim_all", token);
  command.Arg(consumer_).Arg(cursor).Arg(int64_t{count});
  return command;
}

redis::Command FencedOps::Read(int64_t token, int count) const {
  redis::Command command = Call("read", token);
  command.Arg(consumer_).Arg(int64_t{count});
  return command;
}

redis::Command FencedOps::WaitForNew(std::string_view tail_id, Millis block) const {
  redis::Command command("XREAD");
  command.Arg("COUNT").Arg(int64_t{1}).Arg("BLOCK").Arg(static_cast<int64_t>(block.count()));
  command.Arg("STREAMS").Arg(shard_key_).Arg(tail_id);
  return command;
}

redis::Command FencedOps::Ack(int64_t token, std::span<const std::string> ids,
                              redis::AckMode mode) const {
  redis::Command command = Call("ack", token);
  command.Arg(redis::AckModeArg(mode));
  for (const std::string& id : ids) command.Arg(id);
  return command;
}

redis::Command FencedOps::Retry(int64_t token, std::span<const std::string> ids) const {
  redis::Command command = Call("retry", token);
  command.Arg(consumer_);
  for (const std::string& id : ids) command.Arg(id);
  return command;
}

redis::Command FencedOps::KeepAlive(int64_t token, std::span<const std::string> ids) const {
  redis::Command command = Call("keepalive", token);
  command.Arg(consumer_);
  for (const std::string& id : ids) command.Arg(id);
  return command;
}

redis::Command FencedOps::DeadLetter(int64_t token, const StreamEntry& entry,
                                     const redis::DeadLetterMeta& meta, redis::AckMode mode,
                                     int64_t max_len) const {
  redis::Command command = Call("dead_letter", token);
  command.Arg(redis::AckModeArg(mode)).Arg(max_len).Arg(entry.id);
  redis::AppendDeadLetterFields(shard_key_, group_, entry, meta, &command);
  return command;
}

StatusOr<Fenced<int64_t>> FencedOps::ParseInstall(const redis::ReplyView& reply) {
  return ParseFenced<int64_t>(reply, "install",
                              [](std::string_view kind, redis::ReplyView value, int64_t* token) {
                                if (kind != "OK" || !value.IsInteger())
                                  return Unexpected("install");
                                *token = value.Integer();
                                return Status::Ok();
                              });
}

StatusOr<Fenced<redis::AutoClaimReply>> FencedOps::ParseClaimAll(const redis::ReplyView& reply) {
  return ParseFenced<redis::AutoClaimReply>(
      reply, "claim_all",
      [](std::string_view kind, redis::ReplyView value, redis::AutoClaimReply* claimed) {
        if (kind != "OK") return Unexpected("claim_all");
        auto parsed = redis::SubscriptionOps::ParseAutoClaim(value);
        if (!parsed.ok()) return parsed.status();
        *claimed = std::move(*parsed);
        return Status::Ok();
      });
}

StatusOr<Fenced<FencedRead>> FencedOps::ParseRead(const redis::ReplyView& reply) {
  return ParseFenced<FencedRead>(
      reply, "read", [](std::string_view kind, redis::ReplyView value, FencedRead* read) {
        if (kind == "EMPTY" && value.IsString()) {
          read->tail_id = std::string(value.Str());
          return Status::Ok();
        }
        if (kind != "OK" || !value.IsArray()) return Unexpected("read");
        read->entries = redis::SubscriptionOps::ParseEntries(value);
        return Status::Ok();
      });
}

StatusOr<Fenced<int64_t>> FencedOps::ParseAck(const redis::ReplyView& reply) {
  return ParseFenced<int64_t>(reply, "ack",
                              [](std::string_view kind, redis::ReplyView value, int64_t* count) {
                                if (kind != "OK" || !value.IsInteger()) return Unexpected("ack");
                                *count = value.Integer();
                                return Status::Ok();
                              });
}

StatusOr<Fenced<std::vector<StreamEntry>>> FencedOps::ParseEntries(const redis::ReplyView& reply) {
  return ParseFenced<std::vector<StreamEntry>>(
      reply, "retry",
      [](std::string_view kind, redis::ReplyView value, std::vector<StreamEntry>* entries) {
        if (kind != "OK" || !value.IsArray()) return Unexpected("retry");
        *entries = redis::SubscriptionOps::ParseEntries(value);
        return Status::Ok();
      });
}

StatusOr<Fenced<std::vector<std::string>>> FencedOps::ParseIds(const redis::ReplyView& reply) {
  return ParseFenced<std::vector<std::string>>(
      reply, "keepalive",
      [](std::string_view kind, redis::ReplyView value, std::vector<std::string>* ids) {
        if (kind != "OK" || !value.IsArray()) return Unexpected("keepalive");
        for (size_t i = 0; i < value.Size(); ++i) ids->emplace_back(value[i].Str());
        return Status::Ok();
      });
}

StatusOr<Fenced<bool>> FencedOps::ParseDone(const redis::ReplyView& reply) {
  return ParseFenced<bool>(reply, "dead_letter",
                           [](std::string_view kind, redis::ReplyView value, bool* done) {
                             if (kind != "OK" || !value.IsInteger()) {
                               return Unexpected("dead_letter");
                             }
                             *done = value.Integer() == 1;
                             return Status::Ok();
                           });
}

}  // namespace streamcar::sharding
