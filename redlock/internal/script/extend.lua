-- Compare-and-pexpire for one or many leases in one call (Lease.Extend
-- sends one, Do's renewal a batch per node): renew only a key that still
-- holds our value, so an extend can never bring back a lock that expired
-- or was taken, and only ever lengthen its life. Two extends of one lease
-- can reach a node in either order (one may be a straggler of an earlier
-- round), and a shorter one landing last must not cut the expiry below
-- what the other round promised the holder.
-- KEYS[i] lock key i (i = 1..n, n = #ARGV / 2); ARGV[2i-1] our value for
-- it, ARGV[2i] its ttl in ms.
-- KEYS[n+1] the node's admission marker: a node that a reconfiguration
-- marked renews nothing, so a lease of the old settings ends within its
-- ttl of the mark (docs/fencing.md, "Changing the settings of a live
-- deployment").
-- KEYS[n+2] the server's identity (ident.lua).
-- KEYS[n+2+i], when some lease of the call has metadata, lock key i's
-- metadata key. Metadata that is ours follows the lock key's expiry: it
-- is written only after the lock key is found ours, and never decides
-- anything.
-- Returns an array with, per key, 1 renewed (or already long enough),
-- 0 not ours (or not renewed here), and last the identity of the server
-- ('' for none): the client counts a renewal only from the server its
-- entry of the node list was proven to reach (docs/fencing.md, "One
-- server, one vote").
local out = {}
local n = #ARGV / 2
local mark = redis.call('GET', KEYS[n + 1])
local marked = mark and (string.sub(mark, 1, 17) == 'reconfiguring to ' or string.sub(mark, 1, 8) == 'retired,')
for i = 1, n do
  local ttl = tonumber(ARGV[2 * i])
  local v = ARGV[2 * i - 1]
  if not marked and redis.call('GET', KEYS[i]) == v then
    if redis.call('PTTL', KEYS[i]) < ttl then
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
    local mk = KEYS[n + 2 + i]
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
out[n + 1] = redis.call('GET', KEYS[n + 2]) or ''
return out
