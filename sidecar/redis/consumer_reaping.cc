#include "sidecar/redis/consumer_reaping.h"

#include <array>
#include <utility>

#include "sidecar/redis/connection.h"
#include "sidecar/redis/lua/reap.lua.h"

namespace streamcar::redis {
namespace {

Status Unexpected(std::string_view what) {
  return Status(StatusCode::kProtocol, "unexpected reply to " + std::string(what));
}

// A flat [key, value, ...] row's value for `key` (RESP3 maps arrive as the same flat list).
ReplyView Field(const ReplyView& row, std::string_view key) {
  for (size_t i = 0; i + 1 < row.Size(); i += 2) {
    if (row[i].Str() == key) return row[i + 1];
  }
  return ReplyView(nullptr);
}

// One XINFO CONSUMERS inside the script, then a verdict per name: the listing the removal
// relies on is taken in the same atomic step as the removal. Replies inside a script are RESP2,
// so each consumer is a flat [field, value, ...] list. Returns [name, verdict, idle, pending]
// for each name (redis/lua/reap.lua).
const Script kReapScript(lua::kReap);

const std::array<const Script*, 1> kReapScripts = {&kReapScript};

constexpr std::array<std::pair<std::string_view, ReapVerdict>, 5> kVerdicts = {{
    {"removed", ReapVerdict::kRemoved},
    {"self", ReapVerdict::kSelf},
    {"pending", ReapVerdict::kPending},
    {"active", ReapVerdict::kActive},
    {"gone", ReapVerdict::kGone},
}};

}  // namespace

Command ListConsumers(std::string_view stream, std::string_view group) {
  return std::move(Command("XINFO").Arg("CONSUMERS").Arg(stream).Arg(group));
}

StatusOr<std::vector<ConsumerInfo>> ParseConsumers(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray()) return Unexpected("XINFO CONSUMERS");
  std::vector<ConsumerInfo> consumers;
  consumers.reserve(reply.Size());
  for (size_t i = 0; i < reply.Size(); ++i) {
    const ReplyView row = reply[i];
    const ReplyView name = Field(row, "name");
    const ReplyView pending = Field(row, "pending");
    const ReplyView idle = Field(row, "idle");
    if (!name.IsString() || !pending.IsInteger() || !idle.IsInteger()) {
      return Unexpected("XINFO CONSUMERS");
    }
    consumers.push_back({std::string(name.Str()), pending.Integer(), idle.Integer()});
  }
  return consumers;
}

std::vector<std::string> ReapCandidates(std::span<const ConsumerInfo> consumers,
                                        std::string_view self, Millis min_idle) {
  std::vector<std::string> names;
  for (const auto& consumer : consumers) {
    if (consumer.name == self || consumer.pending != 0) continue;
    if (consumer.idle_ms <= min_idle.count()) continue;
    names.push_back(consumer.name);
  }
  return names;
}

bool NeedsRefresh(std::span<const ConsumerInfo> consumers, std::string_view self, Millis quiet) {
  for (const auto& consumer : consumers) {
    if (consumer.name == self) return consumer.pending == 0 && consumer.idle_ms > quiet.count();
  }
  return true;
}

Command RefreshConsumer(std::string_view stream, std::string_view group, std::string_view self) {
  return std::move(Command("XREADGROUP")
                       .Arg("GROUP")
                       .Arg(group)
                       .Arg(self)
                       .Arg("COUNT")
                       .Arg(int64_t{1})
                       .Arg("STREAMS")
                       .Arg(stream)
                       .Arg("0"));
}

const Script& ReapScript() { return kReapScript; }

std::span<const Script* const> ReapScripts() { return kReapScripts; }

Command ReapConsumers(std::string_view stream, std::string_view group, std::string_view self,
                      Millis min_idle, std::span<const std::string> names) {
  Command command = kReapScript.Call({stream});
  command.Arg(group).Arg(self).Arg(static_cast<int64_t>(min_idle.count()));
  for (const auto& name : names) command.Arg(name);
  return command;
}

std::string MissingAclRule(const Status& refusal, std::string_view step_rules) {
  // "... no permissions to run the 'xgroup|delconsumer' command ..."
  const std::string& message = refusal.message();
  constexpr std::string_view kBefore = "to run the '";
  const size_t start = message.find(kBefore);
  if (start != std::string::npos) {
    const size_t name = start + kBefore.size();
    const size_t end = message.find('\'', name);
    if (end != std::string::npos && end > name) return "+" + message.substr(name, end - name);
  }
  return std::string(step_rules);
}

std::string_view ReapVerdictName(ReapVerdict verdict) {
  for (const auto& [name, value] : kVerdicts) {
    if (value == verdict) return name;
  }
  return "unknown";
}

StatusOr<std::vector<ReapResult>> ParseReap(const ReplyView& reply) {
  if (reply.IsError()) return ErrorOf(reply);
  if (!reply.IsArray() || reply.Size() % 4 != 0) return Unexpected("the reap script");
  std::vector<ReapResult> results;
  for (size_t i = 0; i < reply.Size(); i += 4) {
    ReapResult result;
    if (!reply[i].IsString() || !reply[i + 1].IsString() || !reply[i + 2].IsInteger() ||
        !reply[i + 3].IsInteger()) {
      return Unexpected("the reap script");
    }
    result.name = std::string(reply[i].Str());
    bool known = false;
    for (const auto& [name, value] : kVerdicts) {
      if (reply[i + 1].Str() != name) continue;
      result.verdict = value;
      known = true;
    }
    if (!known) return Unexpected("the reap script");
    result.idle_ms = reply[i + 2].Integer();
    result.pending = reply[i + 3].Integer();
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace streamcar::redis
