-- Compare-and-pexpire for one or many leases in one call (Lease.Extend
-- sends one, Do's renewal a batch per node): renew only a key that still
-- holds our value, so an extend can never bring back a lock that expired
-- or was taken, and only ever lengthen its life. Two extends of one lease
-- can reach a node in either order (one may be a straggler of an earlier
-- round), and a shorter one landing last must not cut the expiry below
-- what the other round promised the holder.
-- KEYS[i] lock key i; ARGV[2i-1] our value for it, ARGV[2i] its ttl in ms
-- Returns an array with, per key, 1 renewed (or already long enough),
-- 0 not ours.
local out = {}
for i = 1, #KEYS do
  local ttl = tonumber(ARGV[2 * i])
  if redis.call('GET', KEYS[i]) == ARGV[2 * i - 1] then
    if redis.call('PTTL', KEYS[i]) < ttl then
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
