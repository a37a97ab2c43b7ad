
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
