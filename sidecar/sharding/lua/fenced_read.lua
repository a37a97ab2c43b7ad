
-- KEYS[1] shard, KEYS[2] fence; ARGV group, consumer, count, id (after the token).
local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3],
                        'STREAMS', KEYS[1], ARGV[4])
if read or ARGV[4] ~= '>' then return read end
local tail = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if tail[1] then return tail[1][1] end
return '0-0'
