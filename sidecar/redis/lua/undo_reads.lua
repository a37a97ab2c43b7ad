
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
