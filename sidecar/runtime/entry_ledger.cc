#include "sidecar/runtime/entry_ledger.h"

#include <algorithm>
#include <string>
#include <utility>

#include "sidecar/common/check.h"

namespace streamcar::runtime {

std::string EntryLedger::Met(std::string_view step, std::string_view id, EntryState state) {
  std::string text(step);
  text += " of ";
  text += id;
  text += " in state ";
  text += Name(state);
  return text;
}

std::string_view Name(EntryState state) {
  switch (state) {
    case EntryState::kQueued:
      return "queued";
    case EntryState::kBlocked:
      return "blocked";
    case EntryState::kInFlight:
      return "in_flight";
    case EntryState::kWaitingRetry:
      return "waiting_retry";
    case EntryState::kClaiming:
      return "claiming";
    case EntryState::kDeadLettering:
      return "dead_lettering";
    case EntryState::kDeadLetterWritten:
      return "dead_letter_written";
    case EntryState::kAcking:
      return "acking";
  }
  return "unknown";
}

EntryLedger::EntryLedger(size_t capacity, std::string key_field, uint64_t max_held_bytes)
    : capacity_(capacity),
      key_field_(std::move(key_field)),
      max_held_bytes_(max_held_bytes),
      min_read_(std::max<size_t>(1, capacity / 4)) {}

uint64_t EntryLedger::PayloadBytes(const StreamEntry& entry) {
  uint64_t bytes = 0;
  for (const auto& [field, value] : entry.fields) bytes += field.size() + value.size();
  return bytes;
}

uint64_t EntryLedger::SizeEstimate() const {
  return *std::max_element(recent_sizes_.begin(), recent_sizes_.end());
}

size_t EntryLedger::ReadRoom() const {
  if (intake_stopped_) return 0;
  const size_t room = held_.size() >= capacity_ ? 0 : capacity_ - held_.size();
  if (room == 0 || max_held_bytes_ == kNoByteLimit) return room;
  const uint64_t estimate = SizeEstimate();
  // No size seen yet: one round of the workers (concurrency x batch_size), so a first batch is
  // full, and an unknown size costs at most a quarter of what the entry capacity allows.
  if (estimate == 0) return std::min(room, min_read_);
  const uint64_t free_bytes = held_bytes_ >= max_held_bytes_ ? 0 : max_held_bytes_ - held_bytes_;
  // One read brings at most a quarter of the budget (or one entry, when one is larger), so the
  // read's reply buffers (the socket buffer and the parsed reply, both alive while the entries
  // are copied out) stay small too.
  const uint64_t per_read = std::max<uint64_t>(1, max_held_bytes_ / 4 / estimate);
  const uint64_t fits = std::min(free_bytes / estimate, per_read);
  // Nothing held: one entry is read whatever its size (SPEC 4.2: taken, alone).
  if (fits == 0) return held_.empty() ? 1 : 0;
  return static_cast<size_t>(std::min<uint64_t>(room, fits));
}

bool EntryLedger::WorthReading() const {
  const size_t room = ReadRoom();
  if (room == 0) return false;
  if (room >= min_read_) return true;
  // One lane (a shard, SHARDING.md B8) with entries waiting behind its head: nothing read now
  // could go out before them, so a read of the one or two places a POST frees is only a round
  // trip (a shard made one fenced read per POST). Wait for a worthwhile read or a dry lane.
  if (one_lane_) {
    const auto lane = lanes_.find("");
    if (lane != lanes_.end() && !lane->second.waiting.empty()) return false;
  }
  if (ready_.empty()) return true;
  // Large entries: a quarter of the byte budget free is worth a read even when it is fewer
  // entries than a quarter of the capacity.
  return max_held_bytes_ != kNoByteLimit && held_bytes_ < max_held_bytes_ &&
         max_held_bytes_ - held_bytes_ >= max_held_bytes_ / 4;
}

bool EntryLedger::DeliveryPaused(SteadyTime now) const {
  return now < pause_.until || now < pause_.delivery_until;
}

bool EntryLedger::ReadPaused(SteadyTime now) const {
  // While the handler refuses, the held entries are retried on their own; reading more would only
  // pile entries up. With nothing held, one read is the only way to try the handler again.
  // A delivery-only pause (delivery_until) lets reading go on.
  return now < pause_.until || (pause_.reads_wait_while_held && !held_.empty());
}

std::optional<SteadyTime> EntryLedger::PauseEndsAt() const {
  if (pause_.until == SteadyTime{} || pause_.until == SteadyTime::max()) return std::nullopt;
  return pause_.until;
}

std::optional<SteadyTime> EntryLedger::DeliveryResumesAt() const {
  const SteadyTime at = std::max(pause_.until, pause_.delivery_until);
  if (at == SteadyTime{} || at == SteadyTime::max()) return std::nullopt;
  return at;
}

EntryLedger::Held* EntryLedger::Lookup(std::string_view id) const {
  auto it = held_.find(id);
  return it == held_.end() ? nullptr : it->second.get();
}

EntryLedger::Held* EntryLedger::FindRef(const EntryRef& ref) const {
  Held* entry = Lookup(ref.id);
  return entry != nullptr && entry->generation == ref.generation ? entry : nullptr;
}

bool EntryLedger::Holds(std::string_view id) const { return Lookup(id) != nullptr; }

const StreamEntry* EntryLedger::Find(std::string_view id) const {
  const Held* entry = Lookup(id);
  return entry == nullptr ? nullptr : &entry->entry;
}

std::optional<EntryState> EntryLedger::StateOf(std::string_view id) const {
  const Held* entry = Lookup(id);
  if (entry == nullptr) return std::nullopt;
  return entry->state;
}

EntryLedger::Held* EntryLedger::Insert(StreamEntry entry, EntryState state) {
  auto held = std::make_unique<Held>();
  held->bytes = PayloadBytes(entry);
  held->entry = std::move(entry);
  held->state = state;
  held->generation = next_generation_++;
  held_bytes_ += held->bytes;
  Held* raw = held.get();
  held_.emplace(std::string_view(raw->entry.id), std::move(held));
  return raw;
}

void EntryLedger::MakeReady(Held* entry, bool front) {
  entry->state = EntryState::kQueued;
  if (front) {
    ready_.push_front(entry);
  } else {
    ready_.push_back(entry);
  }
}

size_t EntryLedger::Admit(std::vector<StreamEntry> entries) {
  size_t admitted = 0;
  for (auto& entry : entries) {
    if (Holds(entry.id)) continue;
    std::optional<std::string> key;
    if (one_lane_) {
      key.emplace();
    } else if (!key_field_.empty()) {
      if (const std::string* value = entry.Find(key_field_)) key = *value;
    }
    Held* held = Insert(std::move(entry), EntryState::kQueued);
    recent_sizes_[recent_next_] = held->bytes;
    recent_next_ = (recent_next_ + 1) % kSizeWindow;
    ++admitted;
    if (key) {
      held->key = std::move(key);
      auto [lane, inserted] = lanes_.try_emplace(*held->key);
      if (!inserted && lane->second.kept_for == held->entry.id) {
        // Back after an ambiguous settlement: the lane kept for it is its own again, and it
        // goes before what arrived since.
        lane->second.kept_for.clear();
        --kept_lanes_;
        MakeReady(held, true);
        continue;
      }
      if (!inserted) {
        held->state = EntryState::kBlocked;
        lane->second.waiting.push_back(held);
        continue;
      }
    }
    MakeReady(held, false);
  }
  return admitted;
}

size_t EntryLedger::AdmitForDeadLetter(StreamEntry entry) {
  if (Holds(entry.id)) return 0;
  Held* held = Insert(std::move(entry), EntryState::kDeadLettering);
  held->settle_only = true;
  // Its size is not a read estimate's concern: it is not a sample of what reads bring.
  return 1;
}

size_t EntryLedger::AdmitForAck(std::string id) {
  if (Holds(id)) return 0;
  StreamEntry entry;
  entry.id = std::move(id);
  entry.deleted = true;
  Held* held = Insert(std::move(entry), EntryState::kAcking);
  held->settle_only = true;
  ++acking_;
  return 1;
}

std::vector<EntryRef> EntryLedger::TakeReady(size_t max, SteadyTime now) {
  std::vector<EntryRef> refs;
  if (intake_stopped_ || DeliveryPaused(now)) return refs;
  refs.reserve(std::min(max, ready_.size()));
  while (refs.size() < max && !ready_.empty()) {
    Held* entry = ready_.front();
    // One lane: an entry of a run that failed as a whole goes out alone (OneAtATime).
    if (one_lane_ && entry->alone && !refs.empty()) return refs;
    ready_.pop_front();
    SC_DCHECK(entry->state == EntryState::kQueued, Met("TakeReady", entry->entry.id, entry->state));
    refs.push_back(HandOut(entry));
    if (one_lane_ && entry->alone) return refs;
  }
  if (one_lane_ && !refs.empty()) TakeLaneRun(max, &refs);
  return refs;
}

EntryRef EntryLedger::HandOut(Held* entry) {
  entry->state = EntryState::kInFlight;
  entry->posted_before = entry->posted;
  entry->posted = true;
  entry->generation = next_generation_++;
  ++in_flight_;
  return {entry->entry.id, entry->generation};
}

const StreamEntry* EntryLedger::Entry(const EntryRef& ref) const {
  const Held* entry = FindRef(ref);
  return entry == nullptr ? nullptr : &entry->entry;
}

bool EntryLedger::Lost(const EntryRef& ref) const {
  const Held* entry = FindRef(ref);
  return entry != nullptr && entry->lost;
}

void EntryLedger::LeaveInFlight(Held* entry) {
  --in_flight_;
  entry->state = EntryState::kQueued;  // the caller sets the next state at once
}

void EntryLedger::FreePayload(Held* entry) {
  held_bytes_ -= entry->bytes;
  entry->bytes = 0;
  std::vector<std::pair<std::string, std::string>>().swap(entry->entry.fields);
}

void EntryLedger::EraseRetry(Held* entry) {
  for (auto it = retries_.lower_bound(entry->retry_at);
       it != retries_.end() && it->first == entry->retry_at; ++it) {
    if (it->second == entry) {
      retries_.erase(it);
      return;
    }
  }
}

void EntryLedger::Erase(Held* entry) {
  switch (entry->state) {
    case EntryState::kInFlight:
      --in_flight_;
      break;
    case EntryState::kWaitingRetry:
      EraseRetry(entry);
      break;
    case EntryState::kQueued:
      ready_.erase(std::remove(ready_.begin(), ready_.end(), entry), ready_.end());
      break;
    case EntryState::kAcking:
      --acking_;
      break;
    case EntryState::kBlocked:
    case EntryState::kClaiming:
    case EntryState::kDeadLettering:
    case EntryState::kDeadLetterWritten:
      break;
  }
  FreeLane(entry);
  held_bytes_ -= entry->bytes;
  held_.erase(held_.find(std::string_view(entry->entry.id)));  // destroys *entry
}

EntryLedger::Applied EntryLedger::Accept(const EntryRef& ref) {
  Held* entry = FindRef(ref);
  if (entry == nullptr) return Applied::kStale;
  if (!SC_DCHECK(entry->state == EntryState::kInFlight, Met("Accept", ref.id, entry->state))) {
    return Applied::kStale;
  }
  // A 2xx counts even when the lease was lost meanwhile (SPEC 3.2): acknowledged all the same.
  LeaveInFlight(entry);
  entry->state = EntryState::kAcking;
  ++acking_;
  FreeLane(entry);
  FreePayload(entry);
  return Applied::kApplied;
}

EntryLedger::Applied EntryLedger::ScheduleRetry(const EntryRef& ref, SteadyTime at) {
  Held* entry = FindRef(ref);
  if (entry == nullptr) return Applied::kStale;
  if (!SC_DCHECK(entry->state == EntryState::kInFlight,
                 Met("ScheduleRetry", ref.id, entry->state))) {
    return Applied::kStale;
  }
  if (entry->lost) {  // a peer reclaimed it while it was in flight: only a 2xx is still ours
    Erase(entry);
    return Applied::kLetGo;
  }
  LeaveInFlight(entry);
  entry->state = EntryState::kWaitingRetry;
  entry->retry_at = at;
  retries_.emplace(at, entry);
  return Applied::kApplied;
}

EntryLedger::Applied EntryLedger::DeadLetter(const EntryRef& ref) {
  Held* entry = FindRef(ref);
  if (entry == nullptr) return Applied::kStale;
  if (!SC_DCHECK(entry->state == EntryState::kInFlight, Met("DeadLetter", ref.id, entry->state))) {
    return Applied::kStale;
  }
  if (entry->lost) {
    Erase(entry);
    return Applied::kLetGo;
  }
  LeaveInFlight(entry);
  entry->state = EntryState::kDeadLettering;
  return Applied::kApplied;
}

void EntryLedger::HandBack(std::span<const EntryRef> refs) {
  // Back to the front in their original order; an entry a keepalive found another consumer's
  // meanwhile is let go instead (SPEC 3.2: never delivered again here).
  for (size_t i = refs.size(); i-- > 0;) {
    Held* entry = FindRef(refs[i]);
    if (entry == nullptr) continue;
    if (!SC_DCHECK(entry->state == EntryState::kInFlight,
                   Met("HandBack", refs[i].id, entry->state))) {
      continue;
    }
    if (entry->lost) {
      Erase(entry);
      continue;
    }
    LeaveInFlight(entry);
    // Not sent this time; a delivery an earlier hand-out made (a run sent again) still counts.
    entry->posted = entry->posted_before;
    MakeReady(entry, true);
  }
}

void EntryLedger::SetPause(Pause pause) { pause_ = pause; }

bool EntryLedger::AckConfirmed(std::string_view id) {
  Held* entry = Lookup(id);
  if (entry == nullptr) return false;
  if (!SC_DCHECK(entry->state == EntryState::kAcking, Met("AckConfirmed", id, entry->state))) {
    return false;
  }
  Erase(entry);
  return true;
}

std::vector<std::string> EntryLedger::TakeDueRetries(SteadyTime now) {
  std::vector<std::string> due;
  while (!retries_.empty() && retries_.begin()->first <= now) {
    Held* entry = retries_.begin()->second;
    retries_.erase(retries_.begin());
    SC_DCHECK(entry->state == EntryState::kWaitingRetry,
              Met("TakeDueRetries", entry->entry.id, entry->state));
    entry->state = EntryState::kClaiming;
    due.push_back(entry->entry.id);
  }
  return due;
}

std::optional<SteadyTime> EntryLedger::NextRetryAt() const {
  if (retries_.empty()) return std::nullopt;
  return retries_.begin()->first;
}

bool EntryLedger::RetryClaimed(std::string_view id, int attempts) {
  Held* entry = Lookup(id);
  if (entry == nullptr) return false;
  if (!SC_DCHECK(entry->state == EntryState::kClaiming, Met("RetryClaimed", id, entry->state))) {
    return false;
  }
  entry->entry.attempts = attempts;
  entry->posted = false;  // the claim counted a delivery that has not been made yet
  MakeReady(entry, true);
  return true;
}

bool EntryLedger::RetryNotClaimed(std::string_view id, SteadyTime at) {
  Held* entry = Lookup(id);
  if (entry == nullptr) return false;
  if (!SC_DCHECK(entry->state == EntryState::kClaiming, Met("RetryNotClaimed", id, entry->state))) {
    return false;
  }
  entry->state = EntryState::kWaitingRetry;
  entry->retry_at = at;
  retries_.emplace(at, entry);
  return true;
}

bool EntryLedger::RetryClaimedGone(std::string_view id) {
  Held* entry = Lookup(id);
  if (entry == nullptr) return false;
  if (!SC_DCHECK(entry->state == EntryState::kClaiming,
                 Met("RetryClaimedGone", id, entry->state))) {
    return false;
  }
  entry->state = EntryState::kAcking;
  ++acking_;
  entry->entry.deleted = true;
  FreeLane(entry);
  FreePayload(entry);
  return true;
}

EntryLedger::LostResult EntryLedger::MarkLost(std::string_view id) {
  Held* entry = Lookup(id);
  if (entry == nullptr) return LostResult::kIgnored;
  switch (entry->state) {
    case EntryState::kInFlight:
      if (entry->lost) return LostResult::kIgnored;  // counted at the first keepalive
      entry->lost = true;
      return LostResult::kDropped;
    case EntryState::kClaiming:
    case EntryState::kDeadLettering:
    case EntryState::kDeadLetterWritten:
    case EntryState::kAcking:
      return LostResult::kIgnored;  // its own owner-checked step decides
    case EntryState::kQueued:
    case EntryState::kBlocked:
    case EntryState::kWaitingRetry:
      Erase(entry);
      return LostResult::kDropped;
  }
  return LostResult::kIgnored;
}

bool EntryLedger::Move(std::string_view id, EntryState from, EntryState to, std::string_view step) {
  Held* entry = Lookup(id);
  if (entry == nullptr) return false;
  if (!SC_DCHECK(entry->state == from, Met(step, id, entry->state))) return false;
  entry->state = to;
  return true;
}

bool EntryLedger::DeadLetterWritten(std::string_view id) {
  return Move(id, EntryState::kDeadLettering, EntryState::kDeadLetterWritten, "DeadLetterWritten");
}

bool EntryLedger::DeadLetterUnwritten(std::string_view id) {
  return Move(id, EntryState::kDeadLetterWritten, EntryState::kDeadLettering,
              "DeadLetterUnwritten");
}

bool EntryLedger::Release(std::string_view id) {
  Held* entry = Lookup(id);
  if (entry == nullptr) return false;
  if (!SC_DCHECK(
          entry->state == EntryState::kClaiming || entry->state == EntryState::kDeadLettering ||
              entry->state == EntryState::kDeadLetterWritten || entry->state == EntryState::kAcking,
          Met("Release", id, entry->state))) {
    return false;
  }
  Erase(entry);
  return true;
}

void EntryLedger::StopIntake() { intake_stopped_ = true; }

std::vector<std::string> EntryLedger::KeepAliveIds() const {
  std::vector<std::string> ids;
  ids.reserve(held_.size());
  for (const auto& [id, entry] : held_) {
    if (entry->state != EntryState::kAcking) ids.emplace_back(id);
  }
  return ids;
}

std::vector<std::string> EntryLedger::UnpostedIds() const {
  std::vector<std::string> ids;
  for (const auto& [id, entry] : held_) {
    if (!entry->posted && !entry->settle_only) ids.emplace_back(id);
  }
  return ids;
}

}  // namespace streamcar::runtime
