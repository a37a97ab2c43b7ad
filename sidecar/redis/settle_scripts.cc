#include "sidecar/redis/settle_scripts.h"

#include <array>
#include <string>
#include <string_view>

#include "sidecar/redis/capped_add_lua.h"

namespace streamcar::redis {
namespace {

// Ownership is checked in every script with XPENDING <id> <id> 1: the entry must be pending and
// its consumer must be us. Arguments are built into a table and unpacked last, because Lua's
// unpack() in the middle of an argument list yields only its first value.
const Script kRetryClaimScript(R"lua(
-- KEYS[1] stream; ARGV[1] group, ARGV[2] consumer, ARGV[3..] ids.
-- Returns {XCLAIM reply for the ids still ours (one more delivery each), ids no longer ours}.
local claim, lost = {'XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0}, {}
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then claim[#claim + 1] = ARGV[i] else lost[#lost + 1] = ARGV[i] end
end
local claimed = {}
if #claim > 5 then claimed = redis.call(unpack(claim)) end
return {claimed, lost}
)lua");

const Script kKeepAliveScript(R"lua(
-- KEYS[1] stream; ARGV[1] group, ARGV[2] consumer, ARGV[3..] ids.
-- Refreshes the idle time of the ids still ours (JUSTID: no delivery counted); returns the others.
local claim, lost = {'XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0}, {}
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then claim[#claim + 1] = ARGV[i] else lost[#lost + 1] = ARGV[i] end
end
if #claim > 5 then
  claim[#claim + 1] = 'JUSTID'
  redis.call(unpack(claim))
end
return lost
)lua");

// The parts of the dead-letter scripts both paths share (SPEC 8), so that the one-step script and
// the two-step acknowledgement cannot drift apart: who owns the entry, and how it is acknowledged.
// ARGV[1] group, ARGV[2] consumer, ARGV[3] id, ARGV[4] ack mode (ack | ackdel | ackxdel).
constexpr std::string_view kReturnUnlessOursLua = R"lua(
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if not p[1] or p[1][2] ~= ARGV[2] then return 0 end
)lua";
constexpr std::string_view kAcknowledgeLua = R"lua(
if ARGV[4] == 'ackdel' then
  redis.call('XACKDEL', KEYS[1], ARGV[1], 'ACKED', 'IDS', 1, ARGV[3])
else
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
  if ARGV[4] == 'ackxdel' then redis.call('XDEL', KEYS[1], ARGV[3]) end
end
return 1
)lua";

const Script kDeadLetterScript(std::string(R"lua(
-- KEYS[1] stream, KEYS[2] dead-letter stream; ARGV[1] group, ARGV[2] consumer, ARGV[3] id,
-- ARGV[4] ack mode (ack | ackdel | ackxdel), ARGV[5] dead-letter max length (0: none),
-- ARGV[6..] the fields to write. A failing XADD stops the script before the acknowledgement.)lua") +
                               std::string(kReturnUnlessOursLua) + std::string(kCappedAddLua) +
                               R"lua(local add = capped_add(KEYS[2], ARGV[5], '*')
for i = 6, #ARGV do add[#add + 1] = ARGV[i] end
redis.call(unpack(add)))lua" + std::string(kAcknowledgeLua));

// Step 3 of the two-step dead letter (SPEC 8: a dead-letter stream in another slot than the
// stream, where kDeadLetterScript would be refused with CROSSSLOT): the record was XADDed on the
// dead-letter stream's node; acknowledge the entry only if it is still pending for this consumer.
// Reply 1 acknowledged now, 0 not ours (a peer reclaimed it, or it is no longer pending).
const Script kOwnedAckScript(std::string(R"lua(
-- KEYS[1] stream; ARGV[1] group, ARGV[2] consumer, ARGV[3] id,
-- ARGV[4] ack mode (ack | ackdel | ackxdel), as kDeadLetterScript acknowledges.)lua") +
                             std::string(kReturnUnlessOursLua) + std::string(kAcknowledgeLua));

const Script kUndoReadsScript(R"lua(
-- KEYS[1] stream; ARGV[1] group, ARGV[2] consumer, ARGV[3..] ids read but never delivered.
-- Takes back the delivery the read counted and keeps the idle time, for ids still ours.
local undone = 0
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    local count = math.max(0, p[1][4] - 1)
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'IDLE', p[1][3], 'RETRYCOUNT',
               count, 'JUSTID')
    undone = undone + 1
  end
end
return undone
)lua");

// One replay, atomically in Redis: the dead letter must still exist (a concurrent replay or an
// operator may have taken it), then XADD its original fields to the source stream, and only then
// XDEL it. MULTI/EXEC would not do: it does not roll back, so an XADD failing at EXEC time
// (WRONGTYPE: the source key is not a stream) would still delete the dead letter. In a script a
// failing redis.call ends the script before the XDEL.
const Script kReplayScript(R"lua(
if #redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1]) == 0 then return false end
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
redis.call('XDEL', KEYS[2], ARGV[1])
return id
)lua");

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
