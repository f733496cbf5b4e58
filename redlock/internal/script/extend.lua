-- Compare-and-pexpire for one or many leases in one call (Lease.Extend
-- sends one, Do's renewal a batch per node): renew only a key that still
-- holds our value, so an extend can never bring back a lock that expired
-- or was taken, and only ever lengthen its life. Two extends of one lease
-- can reach a node in either order (one may be a straggler of an earlier
-- round), and a shorter one landing last must not cut the expiry below
-- what the other round promised the holder.
-- KEYS[i] lock key i (i = 1..n, n = #ARGV / 2), and, when some lease of
-- the call has metadata, KEYS[n+i] lock key i's metadata key;
-- ARGV[2i-1] our value for it, ARGV[2i] its ttl in ms
-- Returns an array with, per key, 1 renewed (or already long enough),
-- 0 not ours.
-- Metadata that is ours follows the lock key's expiry: it is written
-- only after the lock key is found ours, and never decides anything.
local out = {}
local n = #ARGV / 2
for i = 1, n do
  local ttl = tonumber(ARGV[2 * i])
  local v = ARGV[2 * i - 1]
  if redis.call('GET', KEYS[i]) == v then
    if redis.call('PTTL', KEYS[i]) < ttl then
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
    local mk = KEYS[n + i]
    if mk then
      local m = redis.call('GET', mk)
      if m and string.sub(m, 1, #v + 1) == v .. '\n' then
        redis.call('PEXPIRE', mk, redis.call('PTTL', KEYS[i]))
      end
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
