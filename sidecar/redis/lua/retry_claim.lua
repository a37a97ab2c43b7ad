
-- KEYS[1] stream; ARGV[1] group, ARGV[2] consumer, ARGV[3..] ids.
-- Returns {XCLAIM reply for the ids still ours (one more delivery each), ids no longer ours,
-- {id, delivery count after the claim, ...} for the ids claimed}. The count is the pending list's
-- (SPEC 3.1: attempts is XPENDING's count), not the caller's: a delivery the caller never saw (an
-- XCLAIM by someone else to this consumer) counts too.
local claim, lost, counts = {'XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0}, {}, {}
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    claim[#claim + 1] = ARGV[i]
    counts[#counts + 1] = ARGV[i]
    counts[#counts + 1] = p[1][4] + 1
  else
    lost[#lost + 1] = ARGV[i]
  end
end
local claimed = {}
if #claim > 5 then claimed = redis.call(unpack(claim)) end
return {claimed, lost, counts}
