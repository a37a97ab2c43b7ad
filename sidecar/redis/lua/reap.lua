
-- KEYS[1] stream; ARGV[1] group, ARGV[2] caller, ARGV[3] min idle (ms), ARGV[4..] names.
local seen = {}
for _, row in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local c = {}
  for i = 1, #row, 2 do c[row[i]] = row[i + 1] end
  seen[c['name']] = c
end
local min_idle = tonumber(ARGV[3])
local out = {}
for i = 4, #ARGV do
  local name, c = ARGV[i], seen[ARGV[i]]
  local verdict, idle, pending = 'gone', 0, 0
  if c then idle, pending = c['idle'], c['pending'] end
  if name == ARGV[2] then
    verdict = 'self'
  elseif c and pending > 0 then
    verdict = 'pending'
  elseif c and idle <= min_idle then
    verdict = 'active'
  elseif c then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
    verdict = 'removed'
  end
  out[#out + 1] = name
  out[#out + 1] = verdict
  out[#out + 1] = idle
  out[#out + 1] = pending
end
return out
