-- Compare-and-pexpire: renew only a key that still exists and holds our
-- value, so an extend can never bring back a lock that expired or was taken.
-- KEYS[1] lock key; ARGV[1] our value; ARGV[2] ttl in ms
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
