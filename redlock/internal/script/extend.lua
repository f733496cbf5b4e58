-- Compare-and-pexpire for one or many leases in one call (Lease.Extend
-- sends one, Do's renewal a batch per node): renew only a key that still
-- holds our value, so an extend can never bring back a lock that expired
-- or was taken, and only ever lengthen its life. Two extends of one lease
-- can reach a node in either order (one may be a straggler of an earlier
-- round), and a shorter one landing last must not cut the expiry below
-- what the other round promised the holder.
-- KEYS[i] lock key i; ARGV[2i-1] our value for it, ARGV[2i] its ttl in ms
-- and, after the lock keys, the node's admission marker (an older caller
-- sends none): a node that a reconfiguration marked renews nothing, so a
-- lease of the old settings ends within its ttl of the mark
-- (docs/fencing.md, "Changing the settings of a live deployment").
-- Returns an array with, per key, 1 renewed (or already long enough),
-- 0 not ours (or not renewed here).
local out = {}
local n = #KEYS
local marked = false
if #ARGV < 2 * n then
  n = n - 1
  local m = redis.call('GET', KEYS[n + 1])
  marked = m and (string.sub(m, 1, 17) == 'reconfiguring to ' or string.sub(m, 1, 8) == 'retired,')
end
for i = 1, n do
  local ttl = tonumber(ARGV[2 * i])
  if not marked and redis.call('GET', KEYS[i]) == ARGV[2 * i - 1] then
    if redis.call('PTTL', KEYS[i]) < ttl then
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
