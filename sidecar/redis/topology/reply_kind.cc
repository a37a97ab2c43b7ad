#include "sidecar/redis/topology/reply_kind.h"

#include <array>
#include <utility>

#include "sidecar/keys/key_slot.h"

namespace streamcar::redis {
namespace {

// The first word of an error reply: the prefix Redis puts before the message.
std::string_view FirstWord(std::string_view text) { return text.substr(0, text.find(' ')); }

// "<slot> <endpoint>:<port>" after MOVED or ASK.
bool ParseRedirect(std::string_view text, Redirect* redirect) {
  const auto space = text.find(' ');
  if (space == std::string_view::npos || space == 0 || space > 5) return false;
  int slot = 0;
  for (char c : text.substr(0, space)) {
    if (c < '0' || c > '9') return false;
    slot = slot * 10 + (c - '0');
  }
  if (slot >= keys::kClusterSlots) return false;
  auto to = keys::ParseRedirectEndpoint(text.substr(space + 1));
  if (!to) return false;
  if (redirect != nullptr) *redirect = Redirect{slot, std::move(*to)};
  return true;
}

}  // namespace

std::string_view ReplyKindName(ReplyKind kind) {
  switch (kind) {
    case ReplyKind::kValue:
      return "value";
    case ReplyKind::kError:
      return "error";
    case ReplyKind::kMoved:
      return "moved";
    case ReplyKind::kAsk:
      return "ask";
    case ReplyKind::kTryAgain:
      return "tryagain";
    case ReplyKind::kClusterDown:
      return "clusterdown";
    case ReplyKind::kLoading:
      return "loading";
    case ReplyKind::kMasterDown:
      return "masterdown";
    case ReplyKind::kReadOnly:
      return "readonly";
    case ReplyKind::kUnblocked:
      return "unblocked";
    case ReplyKind::kNoScript:
      return "noscript";
    case ReplyKind::kCrossSlot:
      return "crossslot";
  }
  return "error";
}

ReplyKind Classify(const ReplyView& reply, Redirect* redirect) {
  if (!reply.IsError()) return ReplyKind::kValue;
  const std::string_view text = reply.Str();
  const std::string_view word = FirstWord(text);
  const std::string_view rest = word.size() < text.size() ? text.substr(word.size() + 1) : "";
  if (word == "MOVED") return ParseRedirect(rest, redirect) ? ReplyKind::kMoved : ReplyKind::kError;
  if (word == "ASK") return ParseRedirect(rest, redirect) ? ReplyKind::kAsk : ReplyKind::kError;
  static constexpr std::array<std::pair<std::string_view, ReplyKind>, 8> kPrefixes = {{
      {"TRYAGAIN", ReplyKind::kTryAgain},
      {"CLUSTERDOWN", ReplyKind::kClusterDown},
      {"LOADING", ReplyKind::kLoading},
      {"MASTERDOWN", ReplyKind::kMasterDown},
      {"READONLY", ReplyKind::kReadOnly},
      {"UNBLOCKED", ReplyKind::kUnblocked},
      {"NOSCRIPT", ReplyKind::kNoScript},
      {"CROSSSLOT", ReplyKind::kCrossSlot},
  }};
  for (const auto& [prefix, kind] : kPrefixes) {
    if (word == prefix) return kind;
  }
  return ReplyKind::kError;
}

bool IsUnblockedByKeyDeletion(const ReplyView& reply) {
  return Classify(reply, nullptr) == ReplyKind::kUnblocked &&
         reply.Str().find("no longer exists") != std::string_view::npos;
}

}  // namespace streamcar::redis
