
-- KEYS[1] shard, KEYS[2] fence; ARGV[1] token, ARGV[2] group, ARGV[3] member,
-- ARGV[4] member epoch, ARGV[5] start id. Installs only move forward; the same token of the same
-- member again is idempotent (a retried install). The fence never expires and is never deleted.
local installed_text = redis.call('HGET', KEYS[2], 'token') or '0'
local token, installed = tonumber(ARGV[1]), tonumber(installed_text)
if token < installed or (token == installed and redis.call('HGET', KEYS[2], 'member') ~= ARGV[3]) then
  return redis.error_reply('STALE ' .. installed_text)
end
if token > installed then
  local clock = redis.call('TIME')
  local since = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  redis.call('HSET', KEYS[2], 'token', ARGV[1], 'member', ARGV[3], 'epoch', ARGV[4],
             'since', since)
end
local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[2], ARGV[5], 'MKSTREAM')
if type(created) == 'table' and created.err and not string.find(created.err, 'BUSYGROUP') then
  return created
end
return token
