
-- KEYS[1] shard, KEYS[2] fence; ARGV group, consumer, cursor, count (after the token).
return redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'COUNT', ARGV[4])
