#include "sidecar/redis/settle_scripts.h"

#include <array>
#include <initializer_list>
#include <string>
#include <string_view>

#include "sidecar/redis/capped_add_lua.h"
#include "sidecar/redis/lua/acknowledge.lua.h"
#include "sidecar/redis/lua/dead_letter_append.lua.h"
#include "sidecar/redis/lua/dead_letter_args.lua.h"
#include "sidecar/redis/lua/keep_alive.lua.h"
#include "sidecar/redis/lua/owned_ack_args.lua.h"
#include "sidecar/redis/lua/replay.lua.h"
#include "sidecar/redis/lua/retry_claim.lua.h"
#include "sidecar/redis/lua/return_unless_ours.lua.h"
#include "sidecar/redis/lua/undo_reads.lua.h"

namespace streamcar::redis {
namespace {

// The scripts are the .lua files of redis/lua/, byte for byte (their SHA1 is their EVALSHA name).

// A script made of parts, joined as they are.
std::string Joined(std::initializer_list<std::string_view> parts) {
  std::string script;
  for (std::string_view part : parts) script += part;
  return script;
}

// Ownership is checked in every script with XPENDING <id> <id> 1: the entry must be pending and
// its consumer must be us. Arguments are built into a table and unpacked last, because Lua's
// unpack() in the middle of an argument list yields only its first value.
const Script kRetryClaimScript(lua::kRetryClaim);

const Script kKeepAliveScript(lua::kKeepAlive);

// The dead-letter scripts share their parts (SPEC 8), so that the one-step script and the
// two-step acknowledgement cannot drift apart: who owns the entry (return_unless_ours.lua), and
// how it is acknowledged (acknowledge.lua); the one-step script also appends with capped_add.
const Script kDeadLetterScript(Joined({lua::kDeadLetterArgs, lua::kReturnUnlessOurs, kCappedAddLua,
                                       lua::kDeadLetterAppend, lua::kAcknowledge}));

// Step 3 of the two-step dead letter (SPEC 8: a dead-letter stream in another slot than the
// stream, where kDeadLetterScript would be refused with CROSSSLOT): the record was XADDed on the
// dead-letter stream's node; acknowledge the entry only if it is still pending for this consumer.
// Reply 1 acknowledged now, 0 not ours (a peer reclaimed it, or it is no longer pending).
const Script kOwnedAckScript(Joined({lua::kOwnedAckArgs, lua::kReturnUnlessOurs,
                                     lua::kAcknowledge}));

const Script kUndoReadsScript(lua::kUndoReads);

// One replay, atomically in Redis: the dead letter must still exist (a concurrent replay or an
// operator may have taken it), then XADD its original fields to the source stream, and only then
// XDEL it. MULTI/EXEC would not do: it does not roll back, so an XADD failing at EXEC time
// (WRONGTYPE: the source key is not a stream) would still delete the dead letter. In a script a
// failing redis.call ends the script before the XDEL.
const Script kReplayScript(lua::kReplay);

const std::array<const Script*, 5> kSettleScripts = {
    &kRetryClaimScript, &kKeepAliveScript, &kDeadLetterScript, &kOwnedAckScript, &kUndoReadsScript};

}  // namespace

const Script& RetryClaimScript() { return kRetryClaimScript; }
const Script& KeepAliveScript() { return kKeepAliveScript; }
const Script& DeadLetterScript() { return kDeadLetterScript; }
const Script& OwnedAckScript() { return kOwnedAckScript; }
const Script& UndoReadsScript() { return kUndoReadsScript; }
const Script& ReplayScript() { return kReplayScript; }

std::span<const Script* const> SettleScripts() { return kSettleScripts; }

}  // namespace streamcar::redis
