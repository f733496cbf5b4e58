-- First step of admitting a node that has no admission marker: make sure a
-- pending mark exists. The mark survives exactly as long as the node keeps
-- its data, so finding the same mark later proves the node did not lose its
-- state again in between.
-- KEYS[1] admission marker, KEYS[2] pending mark; ARGV[1] a fresh random id
-- Returns {1, marker} when the node is already admitted, else {0, mark}.
local m = redis.call('GET', KEYS[1])
if m then
  return {1, m}
end
redis.call('SET', KEYS[2], ARGV[1], 'NX')
return {0, redis.call('GET', KEYS[2])}
