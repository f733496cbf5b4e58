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
-- ttl of the mark (docs/reconfiguration.md, "Changing the settings of a live
-- deployment").
-- KEYS[n+2] the server's identity (ident.lua).
-- KEYS[n+2+i], when some lease of the call has metadata, lock key i's
-- metadata key. Metadata that is ours follows the lock key's expiry: it
-- is written only after the lock key is found ours, and never decides
-- anything.
-- ARGV[2n+1] (optional) re-creation: the 1-based numbers of the leases
-- this node may re-create, separated by spaces, then a newline and the
-- deployment settings the client runs with. A lease so named whose key is
-- missing here gets it back (SET NX with its ttl) where the node is
-- admitted with those settings and carries no tombstone of its value:
-- what an acquire would need to grant it here. The client names a lease
-- only to a node that did not renew it in its last extend round (a node
-- that lost its data in a restart, or never took the key), and counts the
-- round only if it was decided while the lease was trusted, so a key it
-- brings back never outlives the lease's trust or revives a lease another
-- holder followed (docs/protocol.md, "Extends re-create what a restart
-- lost").
-- The last m KEYS, with m leases named for re-creation: their values'
-- tombstones, in the order named.
-- Returns an array with, per key, 1 renewed (or already long enough, or
-- re-created),
-- 0 not ours (or not renewed here), and last the identity of the server
-- ('' for none): the client counts a renewal only from the server its
-- entry of the node list was proven to reach (docs/protocol.md, "One
-- server, one vote").
local out = {}
local n = math.floor(#ARGV / 2)
local mark = redis.call('GET', KEYS[n + 1])
local marked = mark and (string.sub(mark, 1, 17) == 'reconfiguring to ' or string.sub(mark, 1, 8) == 'retired,')
-- recreate[i] is lease i's tombstone key, for the leases named for
-- re-creation, on a node admitted with the client's settings only; the
-- tombstone keys come last, after any metadata keys.
local recreate, tombs = {}, 0
if #ARGV > 2 * n then
  local named = ARGV[2 * n + 1]
  local nl = string.find(named, '\n', 1, true)
  local ks = {}
  for k in string.gmatch(string.sub(named, 1, nl - 1), '%d+') do
    ks[#ks + 1] = tonumber(k)
  end
  tombs = #ks
  if mark and not marked and mark == string.sub(named, nl + 1) then
    for j, k in ipairs(ks) do
      recreate[k] = KEYS[#KEYS - tombs + j]
    end
  end
end
local meta = #KEYS - tombs > n + 2
for i = 1, n do
  local ttl = tonumber(ARGV[2 * i])
  local v = ARGV[2 * i - 1]
  local cur = redis.call('GET', KEYS[i])
  if not cur and recreate[i] and not redis.call('GET', recreate[i]) then
    -- Missing where the node lost its data (or never took it): what an
    -- acquire would do here, with the same checks.
    redis.call('SET', KEYS[i], v, 'NX', 'PX', ttl)
    cur = v
  end
  if not marked and cur == v then
    if redis.call('PTTL', KEYS[i]) < ttl then
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
    if meta then
      local mk = KEYS[n + 2 + i]
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
