-- First step of admitting a node that has no admission marker: make sure a
-- pending mark exists, stamped with this node's clock. The mark survives
-- exactly as long as the node keeps its data, so finding the same mark
-- later proves the node did not lose its state again in between, and its
-- stamp lets any client, not only the one that wrote it, tell when the
-- quarantine is over.
-- KEYS[1] admission marker, KEYS[2] pending mark; ARGV[1] a fresh random id
-- Returns {1, marker} when the node is already admitted, else
-- {0, mark, now}: mark is "id:stamp", stamp and now in microseconds.
local m = redis.call('GET', KEYS[1])
if m then
  return {1, m}
end
local t = redis.call('TIME')
local now = tostring(t[1]) .. string.format('%06d', tonumber(t[2]))
redis.call('SET', KEYS[2], ARGV[1] .. ':' .. now, 'NX')
return {0, redis.call('GET', KEYS[2]), now}
