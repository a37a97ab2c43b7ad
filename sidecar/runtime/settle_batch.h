#pragma once
// The settlement of outcomes as pure functions (SPEC 3.2, 3.3, 4.3): work -> the commands of one
// pipeline (SettleBatch), and that pipeline's replies -> what became of every id, classed
// (ApplySettleReplies). No state, no clock, no logging: settlement.h owns the queues, the
// backoffs and the ledger transitions, and acts on the classes.
//
// A plan is one pipeline of steps, in this order: the SCRIPT LOADs (after a NOSCRIPT), the lease
// keepalive (first, so that a slow rest of the pipeline never costs a lease), the
// acknowledgements of delivered entries, those of entries whose payload is gone, the dead
// letters (one script call each; for the two-step path their ownership checks and their owned
// acknowledgements, below), the retry claims, and the shutdown's undo of reads. Ids are
// chunked at kIdsPerCommand per command, so one call never stalls Redis. Each command (or
// MULTI ... EXEC group) is one span: the ids it carries, of which step.
//
// The two-step dead letter (SPEC 8: the dead-letter stream in another slot than the stream, so
// that the one-step script would be refused with CROSSSLOT) takes three steps on two
// connections: (1) on the stream's connection, XPENDING checks the entry is still pending for
// this consumer (a cheap round trip, in the plan that goes anyway: a lost lease then writes no
// letter, exactly as the one-step script); (2) on the dead-letter stream's connection, the XADD
// of the record (DeadLetterWriteBatch), followed by WAIT when that master has replicas; (3) on
// the stream's connection, the owned acknowledgement (a script: only if still pending for us).
//
// How replies are classed, span by span:
//   - answered: every reply of the span arrived. An error reply (NOSCRIPT aside) is `definite`:
//     not applied; the dead-letter script's 0 and the ids a retry claim or keepalive reports are
//     a `lost_lease`; the rest is applied.
//   - NOSCRIPT: the server lacks the script (restart, SCRIPT FLUSH): nothing ran; load the
//     scripts and try again. Not a failure.
//   - sent without a whole answer (the connection broke or timed out mid-pipeline): `ambiguous`,
//     the step may or may not have been applied. Spans answered before the break are applied.
//   - nothing written (BatchResult::written false, the connection was down): not a failure;
//     the work is tried again after the reconnect.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/common/stream_entry.h"
#include "sidecar/redis/async_connection.h"
#include "sidecar/redis/dead_letter_record.h"
#include "sidecar/redis/reply.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::runtime {

// How a settlement failed (SPEC 4.3); the runtime acts on the class.
enum class SettleClass {
  kLostLease,  // the entry is no longer this consumer's: drop it here
  kDefinite,   // Redis answered with an error: retry the step while the entry stays held
  kAmbiguous,  // sent, then the connection failed or timed out: release the entry
};
// The class label of streamcar_settle_failures_total: "lost_lease" | "definite" | "ambiguous".
std::string_view Name(SettleClass c);

// Commands carry at most this many ids.
inline constexpr size_t kIdsPerCommand = 1000;

// One entry to dead-letter. `entry` is the ledger's (it holds the entry kDeadLettering) and is
// read only while SettleBatch builds the command.
struct DeadLetterJob {
  std::string id;
  const StreamEntry* entry = nullptr;
  redis::DeadLetterMeta meta;
};

struct SettleWork {
  std::vector<std::string> acks;       // delivered entries (2xx)
  std::vector<std::string> gone_acks;  // payload gone: acknowledged, never delivered
  std::vector<DeadLetterJob> dead_letters;
  std::vector<DeadLetterJob> dead_letter_checks;  // two-step (1)
  std::vector<DeadLetterJob> dead_letter_acks;    // two-step (3): the record is written
  std::vector<std::string> retry_claims;
  std::vector<std::string> keepalive;
  std::vector<std::string> undo_reads;
  bool load_scripts = false;  // SCRIPT LOAD every settle script first
};

struct SettlePlan {
  enum class Step {
    kLoadScripts,
    kKeepAlive,
    kAck,
    kGoneAck,
    kDeadLetter,
    kDeadLetterCheck,  // two-step (1): still pending for us?
    kDeadLetterAck,    // two-step (3): acknowledged only if still ours
    kRetryClaim,
    kUndoReads,
    kDeadLetterWrite,  // two-step (2), on the dead-letter stream's connection
    kReplicaWait,      // WAIT after the writes
    kReplicaProbe,     // ROLE: how many replicas that master has
  };
  struct Span {
    Step step = Step::kAck;
    size_t begin = 0, end = 0;  // [begin, end) in `commands`
    std::vector<std::string> ids;
    redis::DeadLetterMeta meta;  // the dead-letter steps only
  };
  std::vector<redis::Command> commands;
  std::vector<Span> spans;

  bool empty() const { return commands.empty(); }
  bool loads_scripts() const { return !spans.empty() && spans.front().step == Step::kLoadScripts; }
  bool Has(Step step) const {
    return std::any_of(spans.begin(), spans.end(),
                       [step](const Span& s) { return s.step == step; });
  }
};
std::string_view Name(SettlePlan::Step step);

SettlePlan SettleBatch(const redis::SubscriptionOps& ops, redis::AckMode mode,
                       const redis::DeadLetterTarget& dlq, SettleWork work);

// Two-step (2): what goes on the dead-letter stream's connection.
struct DeadLetterWriteWork {
  std::vector<DeadLetterJob> writes;
  int wait_replicas = 0;  // WAIT for this many replicas after the writes (0: no WAIT)
  Millis wait_timeout{0};
  bool probe = false;  // ROLE last, after the writes or the WAIT (never alone)
  // WAIT even without writes: letters written earlier on this connection are still unconfirmed
  // (WAIT covers every earlier write of the connection).
  bool confirm = false;
};
SettlePlan DeadLetterWriteBatch(const redis::SubscriptionOps& ops,
                                const redis::DeadLetterTarget& dlq, DeadLetterWriteWork work);

// A dead letter and what its step said (`error`: the error reply, for a refused one).
struct DeadLetterItem {
  std::string id;
  redis::DeadLetterMeta meta;
  std::string error;
};

// Work of a plan that was not applied, by step.
struct Unapplied {
  std::vector<std::string> acks, gone_acks, retry_claims, undo_reads;
  std::vector<DeadLetterItem> dead_letters;
  size_t keepalive_ids = 0;  // ids of keepalive spans in this group
  bool keepalive = false;
  bool empty() const {
    return acks.empty() && gone_acks.empty() && retry_claims.empty() && undo_reads.empty() &&
           dead_letters.empty() && !keepalive;
  }
};

struct SettleResult {
  // Applied.
  std::vector<std::string> acked;                   // delivered entries acknowledged
  std::vector<std::string> gone_acked;              // payload-gone entries acknowledged
  std::vector<DeadLetterItem> dead_lettered;        // written, then acknowledged (either path)
  std::vector<DeadLetterItem> dead_letter_ours;     // two-step (1): still ours, to write
  std::vector<DeadLetterItem> dead_letter_written;  // two-step (2): XADDed, to acknowledge
  std::vector<std::string> claimed;                 // claimed again: one more delivery counted
  std::vector<int> claimed_attempts;      // parallel to claimed: the count now (0: unknown)
  std::vector<std::string> claimed_gone;  // ours, but the payload is gone: to acknowledge
  int64_t undone = 0;                     // reads taken back
  // lost_lease: no longer this consumer's.
  std::vector<std::string> dead_letter_lost;          // nothing written, nothing acknowledged
  std::vector<std::string> dead_letter_written_lost;  // two-step (3): written, a peer's now
  std::vector<std::string> claim_lost;                // not claimed
  std::vector<std::string> keepalive_lost;            // the keepalive found another owner
  // definite: an error reply, not applied. The error text of each step (the last one seen).
  Unapplied definite;
  std::string ack_error, claim_error, keepalive_error, undo_error;
  // Two-step (2): WAIT's answer (how many replicas have the writes) or its error; ROLE's.
  std::optional<int64_t> replicas_acked;
  std::string wait_error;
  bool probe_answered = false;
  StatusOr<int> replicas = 0;
  // NOSCRIPT: not run; the scripts are loaded and the work tried again (not a failure).
  Unapplied noscript;
  std::string noscript_error;
  // The plan's SCRIPT LOAD was answered: with this error ("" when every script loaded).
  bool scripts_answered = false;
  std::string scripts_error;
  // ambiguous: sent without a whole answer. `failure` says why (the connection's status text).
  Unapplied ambiguous;
  std::string failure;
  // Nothing reached Redis: tried again after the reconnect, not a failure.
  Unapplied unsent;

  bool scripts_missing() const { return !noscript.empty(); }
  bool keepalive_failed() const { return definite.keepalive; }
  // How many ids each class covers, as streamcar_settle_failures_total counts them: a keepalive
  // that is ambiguous releases nothing and is not counted (the next beat repeats it).
  size_t Count(SettleClass c) const;
};

SettleResult ApplySettleReplies(const SettlePlan& plan, const redis::BatchResult& result);

}  // namespace streamcar::runtime
