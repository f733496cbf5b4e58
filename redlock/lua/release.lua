-- Compare-and-delete: remove the lock only if it still holds our value, and
-- tell waiters subscribed to ARGV[2] that it is free.
-- KEYS[1] lock key; ARGV[1] our value; ARGV[2] release channel
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
return 0
