-- Bootstrap (Client.Bootstrap) in two steps per node, so that no write that
-- admits a node can land on a node other than the one Bootstrap inspected.
-- ARGV[1] 'claim' or 'admit', ARGV[2] settings, ARGV[3] this Bootstrap's id
-- KEYS[1] admission marker, KEYS[2] pending mark (a hash)
--
-- claim: on a node with neither a marker nor a pending mark (or with this
-- Bootstrap's own claim, from an earlier pass), write a pending mark with
-- Bootstrap's id, stamped with the node's clock, as an ordinary quarantine
-- would start: it is one, and if Bootstrap goes no further the node is
-- admitted one quarantine later like any other. ARGV[4] quarantine in us,
-- ARGV[5] the mark's ttl in ms.
-- Returns 1 claimed, 2 admitted with these settings, -2 admitted under
-- other settings, -1 a pending mark of someone else's: in use.
--
-- admit: set the marker only if the node still carries this Bootstrap's
-- claim, with these settings, no older than ARGV[4] us on the node's clock
-- (docs/protocol.md, "Bootstrap"). A node that lost its data since its claim
-- has none, and a go-redis retry that re-runs this after a restart finds
-- none either. Returns 1 admitted now, 2 already admitted with these
-- settings, -2 admitted under other settings, -1 not admitted.
local m = redis.call('GET', KEYS[1])
if m then
  if m == ARGV[2] then
    return 2
  end
  return -2
end
local p = redis.call('HMGET', KEYS[2], 'id', 'stamp', 'settings')
local t = redis.call('TIME')
if ARGV[1] == 'claim' then
  if p[1] and p[1] ~= ARGV[3] then
    return -1
  end
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'id', ARGV[3], 'stamp', t[1] .. string.format('%06d', tonumber(t[2])),
    'settings', ARGV[2], 'quarantine', ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  return 1
end
if p[1] ~= ARGV[3] or p[3] ~= ARGV[2] then
  return -1
end
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if now - tonumber(p[2]) > tonumber(ARGV[4]) then
  return -1
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('DEL', KEYS[2])
return 1
