-- Compare-and-delete: remove the lock only if it still holds our value, and
-- tell waiters subscribed to ARGV[2] that it is free. Where the key is not
-- ours and ARGV[3] is set, leave a tombstone for our value for ARGV[3] ms:
-- our acquire may still be on its way to this node (its reply was lost or
-- never waited for), and the acquire script refuses a value with a
-- tombstone, so the late SET cannot hold the key after we let go of it.
-- KEYS[1] lock key, KEYS[2] our value's tombstone
-- ARGV[1] our value; ARGV[2] release channel; ARGV[3] tombstone ttl ms or '0'
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
end
return 0
