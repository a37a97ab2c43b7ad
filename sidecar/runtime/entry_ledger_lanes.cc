// The ordering lanes of the entry ledger (entry_ledger.h, "Room and the ordering-key lane"): who
// holds a key's lane, who waits behind it, the one lane of a shard without key_field and its
// runs, and the lanes kept for entries an ambiguous settlement let go.

#include <algorithm>
#include <string>
#include <utility>

#include "sidecar/common/check.h"
#include "sidecar/runtime/entry_ledger.h"

namespace streamcar::runtime {

void EntryLedger::TakeLaneRun(size_t max, std::vector<EntryRef>* refs) {
  auto lane = lanes_.find("");
  // What was just taken holds the lane (every entry of one lane has its key): the entries behind
  // it are the next ids in order, and nothing else can go out before them.
  if (lane == lanes_.end() || !lane->second.kept_for.empty()) return;
  auto& waiting = lane->second.waiting;
  while (refs->size() < max && !waiting.empty() && !waiting.front()->alone) {
    Held* entry = waiting.front();
    waiting.pop_front();
    SC_DCHECK(entry->state == EntryState::kBlocked,
              Met("TakeReady", entry->entry.id, entry->state));
    refs->push_back(HandOut(entry));
    ++lane->second.holders;
  }
}

void EntryLedger::FreeLane(Held* entry) {
  if (!entry->key) return;
  auto lane = lanes_.find(*entry->key);
  entry->key.reset();
  if (lane == lanes_.end()) return;
  auto& waiting = lane->second.waiting;
  if (auto self = std::find(waiting.begin(), waiting.end(), entry); self != waiting.end()) {
    waiting.erase(self);  // let go while still blocked: the lane's head is still out
    return;
  }
  if (--lane->second.holders > 0) return;  // the rest of its hand-out is still out
  PassLane(lane);
}

void EntryLedger::PassLane(std::unordered_map<std::string, KeyLane>::iterator lane) {
  auto& waiting = lane->second.waiting;
  if (waiting.empty()) {
    if (lane->second.kept_for.empty()) lanes_.erase(lane);
    return;
  }
  Held* next = waiting.front();
  waiting.pop_front();
  lane->second.holders = 1;
  MakeReady(next, false);
}

void EntryLedger::Redeliver(std::span<const EntryRef> refs, bool alone) {
  if (!SC_DCHECK(one_lane_, "Redeliver outside one lane")) return;
  auto lane = lanes_.find("");
  if (lane == lanes_.end()) return;  // nothing handed out holds it: every ref is stale
  // Back in front of what waits, last first, so that they keep their order; the lane passes on
  // only after all are back, or a later entry would go out before them.
  for (size_t i = refs.size(); i-- > 0;) {
    Held* entry = FindRef(refs[i]);
    if (entry == nullptr) continue;
    if (!SC_DCHECK(entry->state == EntryState::kInFlight,
                   Met("Redeliver", refs[i].id, entry->state))) {
      continue;
    }
    --lane->second.holders;
    entry->key.reset();  // its hold is given up here, not by Erase
    if (entry->lost) {
      Erase(entry);
      continue;
    }
    LeaveInFlight(entry);
    entry->key.emplace();
    entry->alone = entry->alone || alone;
    entry->state = EntryState::kBlocked;
    entry->generation = next_generation_++;  // this delivery's answer is settled
    lane->second.waiting.push_front(entry);
  }
  if (lane->second.holders == 0 && lane->second.kept_for.empty()) PassLane(lane);
}

bool EntryLedger::ReleaseKeepingLane(std::string_view id) {
  Held* entry = Lookup(id);
  if (entry == nullptr) return false;
  if (!SC_DCHECK(entry->state == EntryState::kClaiming ||
                     entry->state == EntryState::kDeadLettering ||
                     entry->state == EntryState::kDeadLetterWritten,
                 Met("ReleaseKeepingLane", id, entry->state))) {
    return false;
  }
  if (entry->key) {
    auto lane = lanes_.find(*entry->key);
    if (lane != lanes_.end() && lane->second.kept_for.empty()) {
      lane->second.kept_for = entry->entry.id;
      lane->second.kept_at = ++kept_sequence_;
      ++kept_lanes_;
      entry->key.reset();  // Erase leaves the lane as it is
    }
  }
  Erase(entry);
  return true;
}

void EntryLedger::ReleaseKeptLanes(uint64_t up_to) {
  if (kept_lanes_ == 0) return;
  for (auto lane = lanes_.begin(); lane != lanes_.end();) {
    if (lane->second.kept_for.empty() || lane->second.kept_at > up_to) {
      ++lane;
      continue;
    }
    lane->second.kept_for.clear();
    --kept_lanes_;
    auto& waiting = lane->second.waiting;
    if (waiting.empty()) {
      lane = lanes_.erase(lane);
      continue;
    }
    Held* next = waiting.front();
    waiting.pop_front();
    MakeReady(next, false);
    ++lane;
  }
}

}  // namespace streamcar::runtime
