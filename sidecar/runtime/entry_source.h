#pragma once
// Where a subscription loop's entries come from: the seam between the loop and whatever reads
// its stream. A plain subscription reads as one consumer of a group (runtime/plain_intake.h);
// one shard of a sharded subscription reads behind its fence (sharding/fenced_intake.h). The
// loop drives either through this interface alone and never learns which one it has: the
// Ownership it was given (runtime/ownership.h) made it.
//
// Everything a source brings in goes through Intake::Route into the ledger; it never asks for
// more than the ledger has room for (SPEC 4.2), and reads only while the ledger says it may.
//
// Threads: loop thread only. Callbacks run on the loop and never inside the call that caused
// them to be due (Stop's `stopped` included).

#include <cstdint>
#include <functional>
#include <string_view>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::runtime {

class EntrySource {
 public:
  // What a source tells its loop.
  struct Callbacks {
    // Once, after the group exists and the setup checks passed (readiness).
    std::function<void()> group_ready;
    // Retrying cannot fix it: the process exits 1 (the stream or the dead-letter key of another
    // type, ack.delete with other groups and no XACKDEL, authentication refused ...). Nothing is
    // read after it.
    std::function<void(const Status&)> fatal;
    // Once, before any entry is admitted: how acknowledged entries leave the stream.
    std::function<void(redis::AckMode)> ack_mode;
    // Entries were routed into the ledger (for delivery, or only to be acknowledged or
    // dead-lettered): the loop delivers and settles them.
    std::function<void()> admitted;
    // The stream's owner refused a step because another holds it now (the ops'
    // RefusedOwnership: a shard's fence). Nothing is read after it; once, with what the refusal
    // named (a shard: the token installed). `op`: the step refused (install, claim or read,
    // the labels of streamcar_fenced_ops_total).
    std::function<void(int64_t installed, std::string_view op)> refused;
    // Once, when the start-up drain of the own pending list has ended (a shard: its takeover).
    std::function<void()> drained;
  };

  virtual ~EntrySource() = default;

  // Setup (group, dead-letter key type, ack mode), then the own pending list, then new entries.
  // Waits for the read connection when it is not ready yet.
  virtual void Start() = 0;
  // Room freed, a pause began or ended, the handler answered: reads now if it may. When reading
  // is paused now and a blocking read waits, that read is ended, so that nothing arrives that
  // could not be delivered.
  virtual void Poke() = 0;
  // An ambiguous settlement: re-read the own pending list for entries nothing here holds (SPEC
  // 4.3), between two reads, never during one.
  virtual void RequestRecovery() = 0;
  // The settlement met NOGROUP (the stream was deleted or evicted with its group): re-create the
  // group at 0 before the next read, even when there is no room to read (SPEC 4.3 -> 4.2).
  virtual void RequestGroupRecreation() = 0;
  // Shutdown stage 1: nothing new is read. `stopped` runs once nothing is outstanding and what
  // the last read brought has been routed.
  virtual void Stop(std::function<void()> stopped) = 0;

  // After a read that brought entries but fewer than it asked for, the next one waits until
  // `linger` has passed since it returned (runtime/tuning.h). 0: read at once.
  virtual void SetReadLinger(Millis linger) = 0;
  // The dead-letter key is in another slot of a cluster (the two-step path): the loop checks its
  // type on its own node, so setup does not ask the read connection's node.
  virtual void SkipDeadLetterTypeCheck() = 0;
};

}  // namespace streamcar::runtime
