#include "sidecar/redis/dead_letter_record.h"

#include <charconv>

#include "sidecar/redis/capped_add.h"
#include "sidecar/redis/connection.h"
#include "sidecar/redis/settle_scripts.h"

namespace streamcar::redis {
namespace {

std::optional<size_t> MetaIndex(std::string_view name) {
  for (size_t i = 0; i < kDeadLetterMetaFields.size(); ++i) {
    if (kDeadLetterMetaFields[i] == name) return i;
  }
  return std::nullopt;
}

}  // namespace

void AppendDeadLetterFields(std::string_view stream, std::string_view group,
                            const StreamEntry& entry, const DeadLetterMeta& meta,
                            Command* command) {
  for (const auto& [field, value] : entry.fields) command->Arg(field).Arg(value);
  command->Arg("streamcar.stream").Arg(stream);
  command->Arg("streamcar.id").Arg(entry.id);
  command->Arg("streamcar.group").Arg(group);
  command->Arg("streamcar.attempts").Arg(int64_t{meta.attempts});
  command->Arg("streamcar.reason").Arg(meta.reason);
  command->Arg("streamcar.status").Arg(meta.status);
  command->Arg("streamcar.error")
      .Arg(std::string_view(meta.error).substr(0, kDeadLetterErrorBytes));
  command->Arg("streamcar.time").Arg(meta.time_ms);
}

Command DeadLetterAdd(const DeadLetterTarget& dlq, std::string_view stream, std::string_view group,
                      const StreamEntry& entry, const DeadLetterMeta& meta) {
  Command command = CappedAdd(dlq.stream, dlq.max_len, "*");
  AppendDeadLetterFields(stream, group, entry, meta, &command);
  return command;
}

DeadLetterRecord::DeadLetterRecord(StreamEntry entry) : entry_(std::move(entry)) {
  // The trailing run of metadata names, each at most once: a second "streamcar.reason" further
  // up is an original field.
  std::array<bool, kDeadLetterMetaFields.size()> seen{};
  meta_begin_ = entry_.fields.size();
  while (meta_begin_ > 0) {
    auto index = MetaIndex(entry_.fields[meta_begin_ - 1].first);
    if (!index || seen[*index]) break;
    seen[*index] = true;
    --meta_begin_;
  }
}

std::string_view DeadLetterRecord::Meta(std::string_view key) const {
  for (size_t i = meta_begin_; i < entry_.fields.size(); ++i) {
    if (entry_.fields[i].first == key) return entry_.fields[i].second;
  }
  return {};
}

int64_t DeadLetterRecord::MetaInteger(std::string_view key) const {
  const std::string_view text = Meta(key);
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() ? value : 0;
}

std::vector<std::pair<std::string, std::string>> DeadLetterRecord::Original() const {
  return {entry_.fields.begin(), entry_.fields.begin() + static_cast<std::ptrdiff_t>(meta_begin_)};
}

DecodedDeadLetter DeadLetterRecord::Decode() const {
  DecodedDeadLetter decoded;
  decoded.stream = Meta("streamcar.stream");
  decoded.original_id = Meta("streamcar.id");
  decoded.group = Meta("streamcar.group");
  decoded.attempts = Meta("streamcar.attempts");
  decoded.reason = Meta("streamcar.reason");
  decoded.status = Meta("streamcar.status");
  decoded.error = Meta("streamcar.error");
  decoded.attempt_count = MetaInteger("streamcar.attempts");
  decoded.time_ms = MetaInteger("streamcar.time");
  return decoded;
}

bool DeadLetterRecord::BelongsTo(std::string_view stream, std::string_view group) const {
  return Meta("streamcar.stream") == stream && Meta("streamcar.group") == group;
}

Command Replay(std::string_view source_stream, std::string_view dead_letter_stream,
               const DeadLetterRecord& record) {
  // EVAL, not EVALSHA: the CLI sends it once per dead letter on a connection of its own, and
  // EVAL needs no SCRIPT LOAD first.
  Command command("EVAL");
  command.Arg(ReplayScript().body()).Arg(int64_t{2}).Arg(source_stream).Arg(dead_letter_stream);
  command.Arg(record.id());
  for (const auto& [field, value] : record.Original()) command.Arg(field).Arg(value);
  return command;
}

StatusOr<std::optional<std::string>> ParseReplay(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (reply.IsNil()) return std::optional<std::string>();
  if (!reply.IsString()) return Status(StatusCode::kProtocol, "replay: unexpected reply");
  return std::optional<std::string>(std::string(reply.Str()));
}

}  // namespace streamcar::redis
