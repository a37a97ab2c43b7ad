#include "sidecar/log/entry_id.h"

namespace streamcar::log {

std::optional<EntryId> ParseId(std::string_view text) {
  // ParseEntryId (common/text.h) also takes a bare "<ms>", which a window bound or a page
  // position must not be.
  if (text.find('-') == std::string_view::npos) return std::nullopt;
  return ParseEntryId(text);
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
