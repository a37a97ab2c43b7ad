-- The lease on one consumer name of one group (SPEC 4.7), taken and renewed in one step.
-- KEYS[1] the lease (keys::ConsumerLeaseKey): a hash {token, instance} with a TTL.
-- ARGV[1] the caller's token, ARGV[2] its instance, ARGV[3] the expiry (ms), ARGV[4] its own pod's
-- uid ('' when unknown).
-- The lease is the caller's when it is missing (never taken, expired, or lost by Redis: a restart
-- without persistence, a failover to a replica that had not seen it), holds the caller's token,
-- or was taken by an earlier container of the caller's own pod (that process is gone: the kubelet
-- restarts a container only after it ended). Then it is written with the caller's token and the
-- full expiry, and the reply is {1, 'renewed' | 'taken' | 'own_pod'}. Otherwise nothing changes:
-- {0, the holder's instance, the lease's remaining ms}.
local token = redis.call('HGET', KEYS[1], 'token')
if token == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1, 'renewed'}
end
local instance = redis.call('HGET', KEYS[1], 'instance')
local own_pod = ARGV[4] ~= '' and instance == ARGV[4]
if token and not own_pod then
  return {0, instance or '', redis.call('PTTL', KEYS[1])}
end
-- Both fields are overwritten: no DEL, so the ACL user needs no right to delete keys.
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'instance', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if own_pod then return {1, 'own_pod'} end
return {1, 'taken'}
