#pragma once
// The single owner of every entry one subscription holds, from the read (or claim) that brought
// it until Redis confirmed what became of it: queued, blocked behind an earlier entry with the
// same ordering key, in flight to the handler, waiting for a retry, being claimed for the retry,
// being dead-lettered, or being acknowledged. It bounds what intake may read (backpressure, in
// entries and in payload bytes), keeps per-key FIFO order (SPEC 3.5), and keeps delivery and
// reading paused while the delivery gates say so (the handler down or unhealthy).
//
// Single-threaded: the subscription's loop thread makes every call. Nothing here waits and
// nothing reads a clock: the caller passes the time. Nothing outside holds a pointer into it:
// an asynchronous step (a POST) names its entry by EntryRef, which goes stale when the entry is
// let go or handed out again, and a stale ref is ignored. Steps of the settlement name entries
// by id; an id no longer held is ignored too.
//
// The states and every transition (each checks its prior state with SC_DCHECK; a step on an
// entry in any other state is a bug: fatal in debug and sanitizer builds, skipped and logged
// once in release):
//
//   from             step                     to
//   (new)            Admit                    kQueued, or kBlocked behind its key's lane
//   (new)            AdmitForDeadLetter       kDeadLettering   (exhausted on arrival)
//   (new)            AdmitForAck              kAcking          (payload gone)
//   kBlocked         its lane frees           kQueued
//   kQueued          TakeReady                kInFlight        (posted)
//   kInFlight        Accept                   kAcking          (payload and lane freed)
//   kInFlight        ScheduleRetry            kWaitingRetry    (lost: let go)
//   kInFlight        DeadLetter               kDeadLettering   (lost: let go)
//   kInFlight        HandBack                 kQueued, front   (not posted; lost: let go)
//   kWaitingRetry    TakeDueRetries           kClaiming
//   kClaiming        RetryClaimed             kQueued, front   (not posted)
//   kClaiming        RetryNotClaimed          kWaitingRetry
//   kClaiming        RetryClaimedGone         kAcking          (payload and lane freed)
//   kDeadLettering   DeadLetterWritten        kDeadLetterWritten (two-step: the record is XADDed
//                                                               on the dead-letter stream's node;
//                                                               only the acknowledgement is left)
//   kDeadLetterWritten DeadLetterUnwritten   kDeadLettering   (two-step: written unconfirmed on
//                                                               a connection since lost: written
//                                                               again)
//   kAcking          AckConfirmed             gone
//   kClaiming, kDeadLettering, kDeadLetterWritten, kAcking
//                    Release                  gone   (written, lost lease, or ambiguous)
//   kClaiming, kDeadLettering, kDeadLetterWritten
//                    ReleaseKeepingLane       gone   (ambiguous; its lane stays taken, below)
//   kQueued, kBlocked, kWaitingRetry
//                    MarkLost                 gone
//   kInFlight        MarkLost                 kInFlight, lost  (only a 2xx still counts)
//
// Room and the ordering-key lane. An entry holds its lane from the moment it is queued at the
// lane's head until its outcome is known: a retry and a dead letter keep the key busy until they
// are done, as a later entry with the key must not overtake them. Accept (a 2xx) frees the
// payload bytes and the lane at once, but the entry keeps its ROOM until the acknowledgement is
// confirmed (kAcking): the consumer's pending list never holds more than there is room for
// (SPEC 4.2), even for the moment between a 2xx and its XACK. An ambiguous settlement of a retry
// claim or a dead letter lets the entry go, but it may well still be pending, and then comes
// back with the recovery re-read: its lane stays taken meanwhile (ReleaseKeepingLane), so that
// no later entry with its key overtakes it; the entry takes the lane back when it is admitted
// again, and the recovery frees the lanes of entries it did not find (ReleaseKeptLanes).
//
// The byte budget (unchanged from the dispatcher it replaces). Room is counted in entries
// (`capacity`) and in payload bytes (`max_held_bytes`, SPEC 4.2: the field names and values of
// the entries held). Entries read from Redis are already in this consumer's pending list, so
// Admit always takes them; the bound is kept by how much intake asks for. Sizes are unknown
// before a read, so ReadRoom() sizes a read by the largest of the last kSizeWindow entries
// admitted: a quarter of the byte budget at most (or one entry, when one is larger), before any
// size is known a quarter of the entry capacity. Nothing is read while that estimate does not
// fit in the free bytes, unless nothing is held: then one entry is read, alone, however large.
// So the bytes held stay at or below max_held_bytes while entries are no larger than the recent
// ones. Entries suddenly larger than any of the last kSizeWindow can overshoot it, by one read
// (whose count was sized for the smaller entries); no read follows until the bytes are back
// under the budget, and the estimate has then learnt the new size (docs/configuration.md).

#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/stream_entry.h"

namespace streamcar::runtime {

enum class EntryState {
  kQueued,
  kBlocked,
  kInFlight,
  kWaitingRetry,
  kClaiming,
  kDeadLettering,
  kDeadLetterWritten,
  kAcking,
};
std::string_view Name(EntryState state);

// One hand-out of one held entry (TakeReady). The generation changes at every hand-out and every
// admission, so a ref outlives neither the entry nor its delivery.
struct EntryRef {
  std::string id;
  uint64_t generation = 0;
  friend bool operator==(const EntryRef&, const EntryRef&) = default;
};

class EntryLedger {
 public:
  static constexpr uint64_t kNoByteLimit = std::numeric_limits<uint64_t>::max();
  // How many recent entry sizes the read estimate looks at.
  static constexpr size_t kSizeWindow = 64;

  // `capacity`: the most entries held at once. `key_field`: "" for no ordering.
  // `max_held_bytes`: the payload bytes held at once (handler.max_held_bytes).
  EntryLedger(size_t capacity, std::string key_field, uint64_t max_held_bytes = kNoByteLimit);

  // One shard of a sharded subscription without key_field (SHARDING.md B8): every entry goes in
  // one lane, so that at most one hand-out is out at a time and a retry holds back everything
  // after it. A hand-out is a run of consecutive entries (TakeReady's `max`, the batch size),
  // which the handler processes in order: Redeliver puts back what it did not reach.
  // Call before the first Admit.
  void OrderAllInOneLane() { one_lane_ = true; }
  bool one_lane() const { return one_lane_; }

  // The payload bytes of an entry, as the byte budget counts them.
  static uint64_t PayloadBytes(const StreamEntry& entry);

  // --- Intake ---
  // How many entries intake may ask Redis for now: the entry room, bounded by the byte room over
  // the recent entry size (see above). 0: do not read. Always 0 after StopIntake().
  size_t ReadRoom() const;
  // Whether a read is worth making now: room for a worthwhile read (a quarter of the capacity, or
  // a quarter of the byte budget free), or nothing queued for delivery. In one lane, never a
  // smaller read while entries wait behind the lane's head.
  bool WorthReading() const;
  // What the delivery gates say together (runtime/delivery_gates.h), kept here for intake and
  // TakeReady: delivery and reading wait until `until` (SteadyTime::max(): until lifted), and
  // reading after that too, while anything is held, when `reads_wait_while_held`; delivery alone
  // waits until `delivery_until` too (a gate that lets reading go on: a rate limit, a lease).
  struct Pause {
    SteadyTime until{};
    bool reads_wait_while_held = false;
    SteadyTime delivery_until{};
  };
  void SetPause(Pause pause);
  bool ReadPaused(SteadyTime now) const;
  bool DeliveryPaused(SteadyTime now) const;
  // When the reading pause ends by itself (for intake's timer); nullopt when there is none, or
  // when it ends only when lifted.
  std::optional<SteadyTime> PauseEndsAt() const;
  // When the delivery pause ends by itself (for the loop's timer, which pumps then); nullopt as
  // above.
  std::optional<SteadyTime> DeliveryResumesAt() const;

  // New entries from a read or a claim. Ids already held (in any state, kAcking included) are
  // skipped; the count excludes them. Entries with a busy ordering key wait behind it.
  size_t Admit(std::vector<StreamEntry> entries);
  // An entry that crashed a consumer at every delivery (exhausted on arrival): held, with its
  // room and bytes, while it is dead-lettered; never delivered, so it takes no lane. 0: held.
  size_t AdmitForDeadLetter(StreamEntry entry);
  // An entry whose payload is gone (read back as [id, nil]): held by id only while it is
  // acknowledged, with its room. 0: held.
  size_t AdmitForAck(std::string id);

  // --- Delivery ---
  // Up to `max` queued entries, in queue order, now in flight: none while delivery is paused or
  // after StopIntake(). In one lane, the lane's head and the entries waiting behind it, in id
  // order: they hold the lane together until each one's outcome is known; an entry redelivered
  // `alone` goes out on its own.
  std::vector<EntryRef> TakeReady(size_t max, SteadyTime now);
  // The entry `ref` names (any state), or nullptr when the ref is stale.
  const StreamEntry* Entry(const EntryRef& ref) const;
  // Whether a keepalive found the in-flight entry `ref` another consumer's (only a 2xx counts).
  bool Lost(const EntryRef& ref) const;

  // What a delivery's result did to its entry.
  enum class Applied {
    kApplied,  // the transition was made
    kStale,    // the ref is stale (or, a bug caught by SC_DCHECK, not in flight): nothing changed
    kLetGo,    // the entry was lost in flight (a peer owns it): let go, nothing to settle
  };
  // The handler accepted it (2xx, lost or not): kAcking. The payload and the lane are freed now;
  // the room is kept until AckConfirmed.
  Applied Accept(const EntryRef& ref);
  // A retry is due at `at`; the entry keeps its lane meanwhile.
  Applied ScheduleRetry(const EntryRef& ref, SteadyTime at);
  // To the dead-letter stream: kDeadLettering, keeping its lane until it is written.
  Applied DeadLetter(const EntryRef& ref);
  // The handler refused the connection: no attempt was spent. The entries go back to the front
  // of the queue in their original order, never posted; a lost one is let go. (The pause that
  // follows is the refused-connect gate's: runtime/refused_connect_gate.h.)
  void HandBack(std::span<const EntryRef> refs);
  // One lane only: entries of a hand-out that the handler did not process, back to the head of
  // the lane in their order; no attempt is spent and delivery does not pause. A lost one is let
  // go. Two uses (docs/sharding.md, "Batches in a shard"): the entries after the one the handler
  // failed (it processes a shard's batch in order and stops at its first failure), which go behind
  // that entry's retry or dead letter; and every entry of a run that failed as a whole (a non-2xx,
  // a timeout), with `alone`: which entry failed is unknown, so each goes out alone until it is
  // settled, and meets its own outcome.
  void Redeliver(std::span<const EntryRef> refs, bool alone = false);

  // --- Settlement (by id; an id not held is ignored, and the call returns false) ---
  // The acknowledgement was applied: the entry is gone.
  bool AckConfirmed(std::string_view id);
  // Retries due at `now`, in due order, now kClaiming.
  std::vector<std::string> TakeDueRetries(SteadyTime now);
  std::optional<SteadyTime> NextRetryAt() const;
  // The retry claim counted a delivery: back to the front of the queue with `attempts`.
  bool RetryClaimed(std::string_view id, int attempts);
  // The retry claim failed definitely (an error reply): the entry waits until `at` again.
  bool RetryNotClaimed(std::string_view id, SteadyTime at);
  // Ours, but its payload is gone (deleted or trimmed while it waited): kAcking.
  bool RetryClaimedGone(std::string_view id);
  // Two-step dead letter (SPEC 8): the record is written; what is left is the owned
  // acknowledgement, which is all a retry repeats (never a second XADD). Keeps room and lane.
  bool DeadLetterWritten(std::string_view id);
  // Two-step: the record was written on a dead-letter connection that is gone before a replica
  // confirmed it; whether it survived is unknown, so it is to be written again.
  bool DeadLetterUnwritten(std::string_view id);
  // A keepalive found `id` owned by another consumer (a lost lease, SPEC 3.2). A queued, blocked
  // or waiting entry is let go at once; one in flight is marked lost (kDropped both, once). An
  // entry claiming, dead-lettering or acknowledging is left to its own owner-checked step, and an
  // id no longer held needs nothing (kIgnored).
  enum class LostResult { kDropped, kIgnored };
  LostResult MarkLost(std::string_view id);
  // Done with an entry being claimed, dead-lettered (either sub-state) or acknowledged: dead
  // letter written, lost lease, or an ambiguous settlement. Frees its room (and its lane).
  bool Release(std::string_view id);
  // An ambiguous settlement of an entry claiming or dead-lettering (either sub-state): let go as
  // Release does, but
  // its ordering lane stays taken for it (see above). The same as Release without a key.
  bool ReleaseKeepingLane(std::string_view id);
  // A recovery re-read of the own pending list ended: the lanes kept up to `up_to` (the
  // kept_sequence() when that re-read began; a lane kept later may name an entry it had already
  // passed) for entries not admitted again go to the next entry with their key.
  void ReleaseKeptLanes(uint64_t up_to);
  bool has_kept_lanes() const { return kept_lanes_ > 0; }
  size_t kept_lanes() const { return kept_lanes_; }
  // Grows by one with each lane kept.
  uint64_t kept_sequence() const { return kept_sequence_; }

  // --- Stop and queries ---
  // Nothing is handed out and nothing read from now on; outcomes are still settled.
  void StopIntake();
  bool intake_stopped() const { return intake_stopped_; }
  // The ids whose lease the keepalive extends: every held entry but those being acknowledged.
  std::vector<std::string> KeepAliveIds() const;
  // Entries never posted since their last read or claim (the delivery their read counted is taken
  // back at shutdown), in no particular order. Entries admitted to be acknowledged or
  // dead-lettered are not among them: their own settlement decides their pending state.
  std::vector<std::string> UnpostedIds() const;
  bool Holds(std::string_view id) const;
  // Whether entries are queued for delivery (a POST would take some, were the gates open).
  bool HasReady() const { return !ready_.empty() && !intake_stopped_; }
  // The entry held under `id` (any state; only its id once it is being acknowledged), or nullptr.
  // For the settlement, which builds the dead-letter record from it.
  const StreamEntry* Find(std::string_view id) const;
  std::optional<EntryState> StateOf(std::string_view id) const;
  size_t capacity() const { return capacity_; }
  size_t held() const { return held_.size(); }
  size_t in_flight() const { return in_flight_; }
  // Entries kept only until their acknowledgement is confirmed: the settlement flushes acks early
  // when these hold a large share of the capacity, so that room is not starved.
  size_t acking() const { return acking_; }
  uint64_t held_bytes() const { return held_bytes_; }

 private:
  struct Held {
    StreamEntry entry;
    uint64_t bytes = 0;              // payload bytes, counted at admission, freed at Accept
    std::optional<std::string> key;  // ordering key while it holds (or waits for) a lane
    EntryState state = EntryState::kQueued;
    uint64_t generation = 0;
    SteadyTime retry_at{};
    // Handed out for a POST since it was last read or claimed: the delivery Redis counted
    // happened. Entries never posted get that count taken back at shutdown (SPEC 3.2).
    bool posted = false;
    // `posted` before the current hand-out, which HandBack restores (the hand-out sent nothing).
    bool posted_before = false;
    // Admitted only to be acknowledged or dead-lettered (see UnpostedIds).
    bool settle_only = false;
    // A keepalive found it another consumer's while it was in flight (SPEC 3.2, lost lease).
    bool lost = false;
    // One lane: part of a run that failed as a whole; handed out alone (Redeliver).
    bool alone = false;
  };
  struct KeyLane {
    std::deque<Held*> waiting;  // blocked behind the entries of this key that are out
    // The entries that hold the lane: its head, or in one lane the run TakeReady handed out with
    // it (a kept lane counts as one). The lane goes to the next waiting entry at 0.
    size_t holders = 1;
    std::string kept_for;  // the id of a released entry that still holds it, or ""
    uint64_t kept_at = 0;  // kept_sequence() when it was kept
  };

  // A failed check's detail: which step met which state.
  static std::string Met(std::string_view step, std::string_view id, EntryState state);
  // `id`'s state from `from` to `to` (a debug check names `step` when it was not `from`); false
  // when `id` is not held or not in `from`.
  bool Move(std::string_view id, EntryState from, EntryState to, std::string_view step);
  Held* Lookup(std::string_view id) const;
  // The entry `ref` names, or nullptr when stale.
  Held* FindRef(const EntryRef& ref) const;
  Held* Insert(StreamEntry entry, EntryState state);
  uint64_t SizeEstimate() const;  // the largest recent entry size; 0 before any
  void MakeReady(Held* entry, bool front);
  void LeaveInFlight(Held* entry);
  // The entry's lane goes to the next entry with its key, or is freed, once no other entry
  // handed out with it still holds it.
  void FreeLane(Held* entry);
  // No entry holds the lane now: the next waiting entry takes it, or the lane is gone (nothing
  // waiting, nothing kept).
  void PassLane(std::unordered_map<std::string, KeyLane>::iterator lane);
  // Queued or blocked -> in flight, with a fresh generation: its ref.
  EntryRef HandOut(Held* entry);
  // One lane: the entries waiting behind the hand-out just taken join it, up to `refs` of `max`.
  void TakeLaneRun(size_t max, std::vector<EntryRef>* refs);
  void FreePayload(Held* entry);
  void EraseRetry(Held* entry);
  void Erase(Held* entry);

  const size_t capacity_;
  const std::string key_field_;
  bool one_lane_ = false;  // OrderAllInOneLane: every entry's key is ""
  const uint64_t max_held_bytes_;
  // Intake waits for this much room (or an empty queue) rather than reading a few entries at a
  // time: fewer round trips and wake-ups under load.
  const size_t min_read_;
  std::unordered_map<std::string_view, std::unique_ptr<Held>> held_;  // keys view Held::entry.id
  uint64_t held_bytes_ = 0;
  std::array<uint64_t, kSizeWindow> recent_sizes_{};  // ring of the last admitted entry sizes
  size_t recent_next_ = 0;
  uint64_t next_generation_ = 1;
  std::deque<Held*> ready_;
  std::unordered_map<std::string, KeyLane> lanes_;  // present while a key has an entry out
  std::multimap<SteadyTime, Held*> retries_;
  Pause pause_;
  bool intake_stopped_ = false;
  size_t in_flight_ = 0;
  size_t acking_ = 0;
  size_t kept_lanes_ = 0;  // lanes whose kept_for is set
  uint64_t kept_sequence_ = 0;
};

}  // namespace streamcar::runtime
