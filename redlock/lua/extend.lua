-- Compare-and-pexpire: renew only a key that still exists and holds our
-- value, so an extend can never bring back a lock that expired or was
-- taken. It only ever lengthens the key's life: two extends of one lease
-- can reach a node in either order (one may be a straggler of an earlier
-- round), and a shorter one landing last must not cut the expiry below
-- what the other round promised the holder.
-- KEYS[1] lock key; ARGV[1] our value; ARGV[2] ttl in ms
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
