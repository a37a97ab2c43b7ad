#pragma once
// The in-memory owner of every entry this sidecar holds for one subscription: queued, in flight,
// waiting for a retry, or blocked behind an earlier entry with the same ordering key. It bounds
// what the reader may fetch (backpressure), hands work to the delivery workers, keeps per-key FIFO
// order (SPEC 3.5) and pauses delivery while the handler is down. Thread-safe: the reader, the
// workers and the settler all call it; one mutex guards it all.
//
// Lifetime: a HeldEntry* stays valid from Admit until Release; only the settler releases.
//
// Room is counted in entries (`capacity`) and in payload bytes (`max_held_bytes`, SPEC 4.2: the
// field names and values of the entries held). Entries read from Redis are already in this
// consumer's pending list, so Admit always takes them; the bound is kept by how much the reader
// and the reclaim beat ask for. Sizes are unknown before a read, so Room() sizes a read by the
// largest of the last kSizeWindow entries admitted: a quarter of the byte budget at most (or one
// entry, when one is larger), before any size is known a quarter of the entry capacity. Nothing
// is read while that estimate does not fit in the free bytes, unless nothing is held: then one
// entry is read, alone, however large. So the bytes held stay at or below max_held_bytes while
// entries are no larger than the recent ones. Entries suddenly larger than any of the last
// kSizeWindow can overshoot it, by one read (whose count was sized for the smaller entries); no
// read follows until the bytes are back under the budget, and the estimate has then learnt the
// new size (docs/configuration.md).

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/redis/entry.h"

namespace streamcar::consumer {

struct HeldEntry {
  enum class State { kQueued, kBlocked, kInFlight, kWaitingRetry, kSettling };
  StreamEntry entry;
  uint64_t bytes = 0;              // payload bytes (field names + values), counted at Admit
  std::optional<std::string> key;  // ordering key, when ordering is on and the entry has the field
  State state = State::kQueued;
  SteadyTime retry_at{};
  // Handed to a worker for a POST since it was last read or claimed: the delivery Redis counted
  // happened. Entries never posted get that count taken back at shutdown (SPEC 3.2).
  bool posted = false;
  // A keepalive found it owned by another consumer while it was in flight: its result is dropped
  // unless it is a 2xx (SPEC 3.2, lost lease).
  bool lost = false;
};

class Dispatcher {
 public:
  static constexpr uint64_t kNoByteLimit = std::numeric_limits<uint64_t>::max();
  // How many recent entry sizes the read estimate looks at.
  static constexpr size_t kSizeWindow = 64;

  // `capacity`: the most entries held at once. `key_field`: "" for no ordering.
  // `max_held_bytes`: the payload bytes held at once (handler.max_held_bytes).
  Dispatcher(size_t capacity, std::string key_field, uint64_t max_held_bytes = kNoByteLimit);

  // How many entries the reader (or the reclaim beat) may ask Redis for now: the entry room,
  // bounded by the byte room over the recent entry size (see above). 0: do not read.
  size_t Room() const;
  size_t Held() const;
  bool Holds(const std::string& id) const;
  uint64_t HeldBytes() const;
  // The payload bytes of an entry, as the byte budget counts them.
  static uint64_t PayloadBytes(const StreamEntry& entry);
  // Waits until there is room and delivery is not paused, or `timeout` passes, or Stop().
  // Returns the room (0 on timeout or stop).
  size_t WaitForRoom(Millis timeout);

  // New entries from a read or a claim. Ids already held are ignored (returned count excludes
  // them). Entries with a busy ordering key wait behind it.
  size_t Admit(std::vector<StreamEntry> entries);

  // For a delivery worker: up to `max` entries ready to deliver, marked in flight. Waits up to
  // `timeout`; empty on timeout, on Stop(), or while delivery is paused.
  std::vector<HeldEntry*> TakeWork(size_t max, Millis timeout);

  // The handler refused the connection: the entries go back to the front of the queue (no
  // attempt was spent) and delivery pauses for `pause`. Reading pauses until the handler answers
  // again (SPEC 3.2), as long as something is held to try it with.
  void HoldForHandler(const std::vector<HeldEntry*>& entries, Millis pause);
  // The handler answered: lift a handler pause.
  void HandlerAnswered();
  bool handler_paused() const;
  // health_url says the handler is unhealthy (true) or healthy again (false).
  void SetHealthPaused(bool paused);

  // The settler took the outcome of these entries (ack or dead-letter pending).
  void MarkSettling(HeldEntry* entry);
  // Waits for a retry at `at`; the entry keeps its ordering key busy meanwhile.
  void ScheduleRetry(HeldEntry* entry, SteadyTime at);
  // Retries due at `now`, marked settling (the settler claims them, then Requeue or Release).
  std::vector<HeldEntry*> TakeDueRetries(SteadyTime now);
  std::optional<SteadyTime> NextRetryAt() const;
  // After the retry claim: back to the front of the queue with its new attempt count.
  void Requeue(HeldEntry* entry);
  // Done with the entry (acknowledged, dead-lettered, or no longer ours): frees its room and
  // lets the next entry with its key go.
  void Release(HeldEntry* entry);

  // Every held id, for the lease keepalive.
  std::vector<std::string> HeldIds() const;
  // A keepalive found `id` owned by another consumer (a lost lease, SPEC 3.2). A queued, blocked
  // or waiting entry is released at once; one in flight is marked lost, and only a 2xx result of
  // it still counts (kDropped both). One settling is left to its own owner-checked step, and an
  // id no longer held needs nothing (kIgnored).
  enum class LostResult { kDropped, kIgnored };
  LostResult MarkLost(const std::string& id);
  // Held entries never posted since their last read or claim (see HeldEntry::posted).
  std::vector<std::string> UnpostedIds() const;

  // No more work is handed out; TakeWork and WaitForRoom return at once.
  void Stop();
  bool stopped() const;
  size_t in_flight() const;

 private:
  struct KeyLane {
    std::deque<HeldEntry*> waiting;  // blocked behind the one entry of this key that is out
  };
  bool Paused(SteadyTime now) const;
  bool ReadPaused(SteadyTime now) const;
  void ReleaseLocked(HeldEntry* entry);
  // Room() with the mutex held.
  size_t ReadRoom() const;
  // Whether the reader should read now: room for a worthwhile read, or the workers idle.
  bool WorthReading() const;
  uint64_t SizeEstimate() const;  // the largest recent entry size; 0 before any
  void MakeReady(HeldEntry* entry, bool front);

  const size_t capacity_;
  const std::string key_field_;
  const uint64_t max_held_bytes_;
  mutable std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable room_cv_;
  std::unordered_map<std::string, std::unique_ptr<HeldEntry>> held_;
  uint64_t held_bytes_ = 0;
  std::array<uint64_t, kSizeWindow> recent_sizes_{};  // ring of the last admitted entry sizes
  size_t recent_next_ = 0;
  // The reader waits for this much room (or idle workers) rather than reading a few entries at a
  // time: fewer round trips and wake-ups under load.
  const size_t min_read_;
  std::deque<HeldEntry*> ready_;
  std::unordered_map<std::string, KeyLane> lanes_;  // present while a key has an entry out
  std::multimap<SteadyTime, HeldEntry*> retries_;
  SteadyTime handler_paused_until_{};
  bool handler_down_ = false;  // refused, and not answered since
  bool health_paused_ = false;
  bool stopped_ = false;
  size_t in_flight_ = 0;
};

}  // namespace streamcar::consumer
