
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
