-- Read-only view of a node's admission state and, when KEYS[3] and KEYS[4]
-- are given, of one lock key: for peers' checks during admission, Bootstrap
-- and Client.Inspect.
-- KEYS[1] admission marker, KEYS[2] pending mark, KEYS[3] lock key,
-- KEYS[4] fence key, KEYS[5] (optional) the key's holder metadata
-- Returns {marker, pending settings, pending stamp, pending quarantine, now,
-- lock value, lock pttl, fence[, metadata]}; '' for what is absent, now in
-- us.
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local p = redis.call('HMGET', KEYS[2], 'settings', 'stamp', 'quarantine')
local out = {redis.call('GET', KEYS[1]) or '', p[1] or '', p[2] or '', p[3] or '', now}
if KEYS[3] then
  out[6] = redis.call('GET', KEYS[3]) or ''
  out[7] = redis.call('PTTL', KEYS[3])
  out[8] = redis.call('GET', KEYS[4]) or ''
  if KEYS[5] then
    out[9] = redis.call('GET', KEYS[5]) or ''
  end
end
return out
