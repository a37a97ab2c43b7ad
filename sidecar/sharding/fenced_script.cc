#include "sidecar/sharding/fenced_script.h"

#include <string>

#include "sidecar/redis/capped_add_lua.h"

namespace streamcar::sharding {
namespace {

// The data plane of a sharded subscription (SHARDING.md B5): every step that changes a shard's
// Redis state compares the caller's fence token with the one installed on the shard, in the same
// script, in the shard's slot. A replaced owner can then no longer read, claim, acknowledge or
// dead-letter, whatever the coordinator believes at that moment. The blocking wait is not here:
// Redis refuses BLOCK inside scripts, and a plain XREAD on the tail id changes nothing.
const redis::Script kFencedScript(std::string(redis::kCappedAddLua) + R"lua(
-- KEYS[1] shard stream, KEYS[2] its fence hash, KEYS[3] its dead-letter stream (dead_letter only).
-- ARGV[1] op, ARGV[2] token, ARGV[3] group, then per op:
--   install     member, member epoch, start id      -> {'OK', token} | {'STALE', installed}
--   claim_all   consumer, cursor, count             -> {'OK', XAUTOCLAIM reply}
--   read        consumer, count                     -> {'OK', entries} | {'EMPTY', tail id}
--   ack         ack mode, ids...                    -> {'OK', acknowledged}
--   retry       consumer, ids...                    -> {'OK', XCLAIM reply}  (one more delivery)
--   keepalive   consumer, ids...                    -> {'OK', ids}           (no delivery counted)
--   dead_letter ack mode, dead-letter max length, id, fields... -> {'OK', 1 | 0 not pending}
-- Every op but install answers {'FENCED', installed} when the token is not the installed one.
local op, token, group = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local installed = tonumber(redis.call('HGET', KEYS[2], 'token') or '0')

local function acknowledge(mode, ids)
  if #ids == 0 then return 0 end
  if mode == 'ackdel' then
    redis.call('XACKDEL', KEYS[1], group, 'ACKED', 'IDS', #ids, unpack(ids))
    return #ids
  end
  local acked = redis.call('XACK', KEYS[1], group, unpack(ids))
  if mode == 'ackxdel' then redis.call('XDEL', KEYS[1], unpack(ids)) end
  return acked
end
local function rest(from)
  local out = {}
  for i = from, #ARGV do out[#out + 1] = ARGV[i] end
  return out
end

if op == 'install' then
  local holder = redis.call('HGET', KEYS[2], 'member')
  if token < installed or (token == installed and holder ~= ARGV[4]) then
    return {'STALE', installed}
  end
  if token > installed then
    local clock = redis.call('TIME')
    local since = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
    redis.call('HSET', KEYS[2], 'token', token, 'member', ARGV[4], 'epoch', ARGV[5],
               'since', since)
  end
  local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], group, ARGV[6], 'MKSTREAM')
  if type(created) == 'table' and created.err and not string.find(created.err, 'BUSYGROUP') then
    return created
  end
  return {'OK', token}
end
if token ~= installed then return {'FENCED', installed} end

if op == 'claim_all' then
  return {'OK', redis.call('XAUTOCLAIM', KEYS[1], group, ARGV[4], 0, ARGV[5], 'COUNT', ARGV[6])}
elseif op == 'read' then
  local read = redis.call('XREADGROUP', 'GROUP', group, ARGV[4], 'COUNT', ARGV[5],
                          'STREAMS', KEYS[1], '>')
  if read then return {'OK', read[1][2]} end
  local tail = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  return {'EMPTY', tail[1] and tail[1][1] or '0-0'}
elseif op == 'ack' then
  return {'OK', acknowledge(ARGV[4], rest(5))}
elseif op == 'retry' or op == 'keepalive' then
  local ids = rest(5)
  if #ids == 0 then return {'OK', {}} end
  local claim = {'XCLAIM', KEYS[1], group, ARGV[4], 0}
  for _, id in ipairs(ids) do claim[#claim + 1] = id end
  if op == 'keepalive' then claim[#claim + 1] = 'JUSTID' end
  return {'OK', redis.call(unpack(claim))}
elseif op == 'dead_letter' then
  -- Only an entry still pending is written: a repeated call (its reply lost) writes no second
  -- record.
  if not redis.call('XPENDING', KEYS[1], group, ARGV[6], ARGV[6], 1)[1] then return {'OK', 0} end
  local add = capped_add(KEYS[3], ARGV[5], '*')
  for i = 7, #ARGV do add[#add + 1] = ARGV[i] end
  redis.call(unpack(add))
  acknowledge(ARGV[4], {ARGV[6]})
  return {'OK', 1}
end
return redis.error_reply('ERR unknown fenced op ' .. tostring(op))
)lua");

}  // namespace

const redis::Script& FencedScript() { return kFencedScript; }

}  // namespace streamcar::sharding
