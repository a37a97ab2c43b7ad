
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
