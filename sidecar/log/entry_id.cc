#include "sidecar/log/entry_id.h"

#include <charconv>

namespace streamcar::log {
namespace {

bool ParseDigits(std::string_view text, uint64_t* value) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;  // from_chars alone would accept nothing else, but be plain
  }
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::optional<EntryId> ParseId(std::string_view text) {
  const auto dash = text.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  EntryId id;
  if (!ParseDigits(text.substr(0, dash), &id.ms)) return std::nullopt;
  if (!ParseDigits(text.substr(dash + 1), &id.seq)) return std::nullopt;
  return id;
}

std::string FormatId(const EntryId& id) { return id.ToString(); }

std::optional<EntryId> Successor(const EntryId& id) {
  if (id.seq != UINT64_MAX) return EntryId{id.ms, id.seq + 1};
  if (id.ms != UINT64_MAX) return EntryId{id.ms + 1, 0};
  return std::nullopt;
}

std::optional<EntryId> Predecessor(const EntryId& id) {
  if (id.seq != 0) return EntryId{id.ms, id.seq - 1};
  if (id.ms != 0) return EntryId{id.ms - 1, UINT64_MAX};
  return std::nullopt;
}

int CompareIds(std::string_view a, std::string_view b) {
  const EntryId x = ParseId(a).value_or(kMinId);
  const EntryId y = ParseId(b).value_or(kMinId);
  if (x < y) return -1;
  return x == y ? 0 : 1;
}

std::string MaxId(const std::string& a, const std::string& b) {
  return CompareIds(a, b) >= 0 ? a : b;
}

}  // namespace streamcar::log
