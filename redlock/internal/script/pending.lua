-- First step of admitting a node that has no admission marker: make sure a
-- pending mark exists, stamped with this node's clock. The mark lives in
-- the node's data, so finding the same mark later proves the node did not
-- lose its state in between, and its stamp lets any client, not only the
-- one that wrote it, tell when the quarantine is over. The mark records
-- the settings and the quarantine it was started with; it expires after
-- ARGV[4] ms, so a mark no client followed up (or one a misconfigured
-- client left) does not stay forever: a new one starts a new quarantine.
-- KEYS[1] admission marker, KEYS[2] pending mark (a hash)
-- ARGV[1] a fresh random id, ARGV[2] settings, ARGV[3] quarantine in us,
-- ARGV[4] the mark's ttl in ms, ARGV[5] '1' to replace a mark started
-- with other settings (the caller has seen peers admitted with its own:
-- a misconfigured client's mark must not hold up the deployment; starting
-- over only makes the quarantine end later)
-- Returns {1, marker} when the node is admitted, else
-- {0, id, stamp, settings, quarantine, now}; stamp and now in us.
local m = redis.call('GET', KEYS[1])
if m then
  return {1, m}
end
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local p = redis.call('HMGET', KEYS[2], 'id', 'stamp', 'settings', 'quarantine')
if not p[1] or (ARGV[5] == '1' and p[3] ~= ARGV[2]) then
  redis.call('HSET', KEYS[2], 'id', ARGV[1], 'stamp', now, 'settings', ARGV[2], 'quarantine', ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  p = {ARGV[1], now, ARGV[2], ARGV[3]}
end
return {0, p[1], p[2], p[3], p[4], now}
