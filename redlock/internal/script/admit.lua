-- Admit a node: set its marker to the deployment's settings, only if it
-- still carries the very pending mark the caller saw (so it has not lost
-- its data since the mark was written), the mark was started with the same
-- settings, and it is at least its own quarantine old on this node's clock.
-- There is no shortcut: every node serves its quarantine, whoever admits it.
-- KEYS[1] admission marker, KEYS[2] pending mark
-- ARGV[1] the mark's id, ARGV[2] settings
-- Returns 1 admitted (now or before, with these settings), 0 not (the mark
-- is gone, is another one, or is too young), -2 admitted under other
-- settings.
local m = redis.call('GET', KEYS[1])
if m then
  if m == ARGV[2] then
    return 1
  end
  return -2
end
local p = redis.call('HMGET', KEYS[2], 'id', 'stamp', 'settings', 'quarantine')
if p[1] ~= ARGV[1] or p[3] ~= ARGV[2] then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if now - tonumber(p[2]) < tonumber(p[4]) then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('DEL', KEYS[2])
return 1
