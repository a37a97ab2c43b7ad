#include "sidecar/sharding/fenced_script.h"

#include <array>
#include <string>
#include <string_view>

#include "sidecar/redis/settle_scripts.h"

namespace streamcar::sharding {
namespace {

// The check every step but the install starts with. The token (ARGV[1]) is taken out of ARGV, so
// the rest is the step's own arguments, as the plain scripts number them; the fence is the last
// key. A replaced owner can then no longer read, claim, acknowledge or dead-letter, whatever the
// coordinator believes at that moment (B2).
constexpr std::string_view kFenceCheckLua = R"lua(
local fence_token = table.remove(ARGV, 1)
local installed_token = redis.call('HGET', KEYS[#KEYS], 'token') or '0'
if installed_token ~= fence_token then return redis.error_reply('FENCED ' .. installed_token) end
)lua";

redis::Script Fenced(std::string_view body) {
  return redis::Script(std::string(kFenceCheckLua) + std::string(body));
}

const redis::Script kInstallScript(R"lua(
-- KEYS[1] shard, KEYS[2] fence; ARGV[1] token, ARGV[2] group, ARGV[3] member,
-- ARGV[4] member epoch, ARGV[5] start id. Installs only move forward; the same token of the same
-- member again is idempotent (a retried install). The fence never expires and is never deleted.
local installed_text = redis.call('HGET', KEYS[2], 'token') or '0'
local token, installed = tonumber(ARGV[1]), tonumber(installed_text)
if token < installed or (token == installed and redis.call('HGET', KEYS[2], 'member') ~= ARGV[3]) then
  return redis.error_reply('STALE ' .. installed_text)
end
if token > installed then
  local clock = redis.call('TIME')
  local since = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  redis.call('HSET', KEYS[2], 'token', ARGV[1], 'member', ARGV[3], 'epoch', ARGV[4],
             'since', since)
end
local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[2], ARGV[5], 'MKSTREAM')
if type(created) == 'table' and created.err and not string.find(created.err, 'BUSYGROUP') then
  return created
end
return token
)lua");

const redis::Script kClaimAllScript = Fenced(R"lua(
-- KEYS[1] shard, KEYS[2] fence; ARGV group, consumer, cursor, count (after the token).
return redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'COUNT', ARGV[4])
)lua");

const redis::Script kReadScript = Fenced(R"lua(
-- KEYS[1] shard, KEYS[2] fence; ARGV group, consumer, count, id (after the token).
local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3],
                        'STREAMS', KEYS[1], ARGV[4])
if read or ARGV[4] ~= '>' then return read end
local tail = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if tail[1] then return tail[1][1] end
return '0-0'
)lua");

const redis::Script kTakeoverScript = Fenced(R"lua(
-- KEYS[1] shard, KEYS[2] fence; ARGV group, consumer, count, cursor (after the token). One page of
-- the takeover (B5 step 3): every pending entry of the shard after the cursor (exclusive; "0" from
-- the start), whoever read it, is claimed to this consumer with one more delivery (XAUTOCLAIM,
-- min-idle 0) and returned as a history read returns entries: [[shard, [[id, fields] | [id, nil]]]]
-- in id order, an entry deleted while pending as [id, nil]. Nothing left: nil.
local function id_parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local start = '0-0'
if ARGV[4] ~= '0' and ARGV[4] ~= '0-0' then
  -- XAUTOCLAIM's start is inclusive: begin just after the cursor. A sequence number at 2^53 or
  -- above (never minted by Redis in practice) moves on to the next millisecond.
  local ms, seq = id_parts(ARGV[4])
  if seq + 1 < 2^53 then
    start = string.format('%d-%d', ms, seq + 1)
  else
    start = string.format('%d-0', ms + 1)
  end
end
local claimed = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, start, 'COUNT', ARGV[3])
local page = {}
for _, entry in ipairs(claimed[2]) do
  if entry then page[#page + 1] = entry end
end
for _, id in ipairs(claimed[3] or {}) do page[#page + 1] = {id, false} end
if #page == 0 then return false end
table.sort(page, function(x, y)
  local x_ms, x_seq = id_parts(x[1])
  local y_ms, y_seq = id_parts(y[1])
  if x_ms ~= y_ms then return x_ms < y_ms end
  return x_seq < y_seq
end)
return {{KEYS[1], page}}
)lua");

const redis::Script kAckScript = Fenced(R"lua(
-- KEYS[1] shard, KEYS[2] fence; ARGV group, ack mode (ack | ackdel | ackxdel), ids.
local ids = {}
for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then return 0 end
if ARGV[2] == 'ackdel' then
  redis.call('XACKDEL', KEYS[1], ARGV[1], 'ACKED', 'IDS', #ids, unpack(ids))
  return #ids
end
local acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
if ARGV[2] == 'ackxdel' then redis.call('XDEL', KEYS[1], unpack(ids)) end
return acked
)lua");

}  // namespace

const redis::Script& FencedInstallScript() { return kInstallScript; }
const redis::Script& FencedClaimAllScript() { return kClaimAllScript; }
const redis::Script& FencedReadScript() { return kReadScript; }
const redis::Script& FencedTakeoverScript() { return kTakeoverScript; }
const redis::Script& FencedAckScript() { return kAckScript; }
// The plain bodies live in another file: these are built on first use, never during static
// initialisation (whose order across files is unspecified).
template <const redis::Script& (*Plain)()>
const redis::Script& FencedCopy() {
  static const redis::Script script = Fenced(Plain().body());
  return script;
}

const redis::Script& FencedRetryClaimScript() { return FencedCopy<&redis::RetryClaimScript>(); }
const redis::Script& FencedKeepAliveScript() { return FencedCopy<&redis::KeepAliveScript>(); }
const redis::Script& FencedDeadLetterScript() { return FencedCopy<&redis::DeadLetterScript>(); }
const redis::Script& FencedOwnedAckScript() { return FencedCopy<&redis::OwnedAckScript>(); }
const redis::Script& FencedUndoReadsScript() { return FencedCopy<&redis::UndoReadsScript>(); }

std::span<const redis::Script* const> FencedScripts() {
  static const std::array<const redis::Script*, 10> scripts = {
      &FencedInstallScript(),   &FencedClaimAllScript(),   &FencedReadScript(),
      &FencedTakeoverScript(),  &FencedAckScript(),        &FencedRetryClaimScript(),
      &FencedKeepAliveScript(), &FencedDeadLetterScript(), &FencedOwnedAckScript(),
      &FencedUndoReadsScript()};
  return scripts;
}

}  // namespace streamcar::sharding
