#include "sidecar/log/follow_gap.h"

#include <algorithm>
#include <string_view>

namespace streamcar::log {

StreamRemovals ParseStreamRemovals(const redis::ReplyView& info) {
  StreamRemovals removals;
  if (!info.IsArray()) return removals;
  removals.exists = true;
  for (size_t i = 0; i + 1 < info.Size(); i += 2) {
    const std::string_view name = info[i].Str();
    const auto value = info[i + 1];
    if (name == "max-deleted-entry-id") {
      removals.max_deleted = ParseId(value.Str());
    } else if (name == "first-entry" && value.IsArray() && value.Size() > 0) {
      removals.first_entry = ParseId(value[0].Str());
    }
  }
  return removals;
}

std::optional<EntryId> SkippedUpTo(const EntryId& read_from, const EntryId& first_read,
                                   const EntryId& last_read,
                                   const std::optional<StreamRemovals>& removals) {
  if (Successor(read_from) == first_read) return std::nullopt;
  if (!removals || !removals->exists || !removals->first_entry) return last_read;
  EntryId floor = read_from;
  if (*removals->first_entry > read_from) {
    floor = std::max(floor, Predecessor(*removals->first_entry).value_or(kMinId));
  }
  if (removals->max_deleted && *removals->max_deleted > read_from) {
    floor = std::max(floor, *removals->max_deleted);
  }
  if (floor == read_from) return std::nullopt;
  return std::min(floor, last_read);
}

}  // namespace streamcar::log
