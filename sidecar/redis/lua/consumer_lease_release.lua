-- A clean shutdown lets the next process take the consumer name at once (SPEC 4.7).
-- KEYS[1] the lease (keys::ConsumerLeaseKey); ARGV[1] the caller's token. Removed only while it
-- is still the caller's: a lease another process took is never touched. HDEL of both fields
-- empties the hash, which Redis then removes (no DEL: the ACL user needs no right to delete keys).
-- Reply: 1 removed, 0 not.
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'token', 'instance')
return 1
