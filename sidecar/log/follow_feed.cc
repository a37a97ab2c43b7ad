#include "sidecar/log/follow_feed.h"

#include <algorithm>

namespace streamcar::log {

size_t EntryBytes(const StreamEntry& entry) {
  size_t bytes = entry.id.size();
  for (const auto& [name, value] : entry.fields) bytes += name.size() + value.size();
  return bytes;
}

void Feed::Append(StreamEntry entry) {
  auto id = ParseId(entry.id);
  if (!id || *id <= last) return;
  last = *id;
  const size_t entry_bytes = EntryBytes(entry);
  bytes += entry_bytes;
  buffer.push_back({*id, std::move(entry), entry_bytes});
}

void Feed::Trim(size_t max_entries, size_t max_bytes) {
  while (!buffer.empty() && (buffer.size() > max_entries || bytes > max_bytes)) {
    floor = buffer.front().id;
    bytes -= buffer.front().bytes;
    buffer.pop_front();
  }
}

void Feed::RaiseFloor(const EntryId& to) {
  const EntryId target = std::min(to, last);
  if (target <= floor) return;
  floor = target;
  while (!buffer.empty() && buffer.front().id <= floor) {
    bytes -= buffer.front().bytes;
    buffer.pop_front();
  }
}

void Feed::TakeAfter(EntryId* position, std::vector<StreamEntry>* out, size_t max_bytes) const {
  auto first = std::upper_bound(buffer.begin(), buffer.end(), *position,
                                [](const EntryId& id, const Buffered& b) { return id < b.id; });
  size_t taken = 0;
  for (auto it = first; it != buffer.end() && out->size() < static_cast<size_t>(kFollowBatch) &&
                        (out->empty() || taken < max_bytes);
       ++it) {
    out->push_back(it->entry);
    taken += it->bytes;
    *position = it->id;
  }
}

}  // namespace streamcar::log
