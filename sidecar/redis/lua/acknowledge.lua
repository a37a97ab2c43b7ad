
if ARGV[4] == 'ackdel' then
  redis.call('XACKDEL', KEYS[1], ARGV[1], 'ACKED', 'IDS', 1, ARGV[3])
else
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
  if ARGV[4] == 'ackxdel' then redis.call('XDEL', KEYS[1], ARGV[3]) end
end
return 1
