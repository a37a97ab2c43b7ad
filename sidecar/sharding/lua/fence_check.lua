
local fence_token = table.remove(ARGV, 1)
local installed_token = redis.call('HGET', KEYS[#KEYS], 'token') or '0'
if installed_token ~= fence_token then return redis.error_reply('FENCED ' .. installed_token) end
