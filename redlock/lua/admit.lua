-- Admit a node: set its marker, provided it still carries the pending mark
-- the caller waited on (ARGV[2] '1'), or unconditionally for a node no
-- other node has a record of (ARGV[2] '0').
-- KEYS[1] admission marker, KEYS[2] pending mark; ARGV[1] the mark, ARGV[2]
-- Returns 1 when the node is admitted (now or already), 0 otherwise.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 1
end
if ARGV[2] == '1' and redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
