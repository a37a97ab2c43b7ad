
if #redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1]) == 0 then return false end
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
redis.call('XDEL', KEYS[2], ARGV[1])
return id
