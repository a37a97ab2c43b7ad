
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
