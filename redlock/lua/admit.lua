-- Admit a node: set its marker. A node that lost its state (ARGV[2] '1')
-- is admitted only if it still carries the pending mark the caller saw and
-- that mark is at least ARGV[3] microseconds old on this node's clock; a
-- node no peer has a record of (ARGV[2] '0') is admitted at once.
-- KEYS[1] admission marker, KEYS[2] pending mark
-- ARGV[1] the mark, ARGV[2] '1' or '0', ARGV[3] quarantine in microseconds
-- Returns 1 when the node is admitted (now or already), 0 otherwise.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 1
end
if ARGV[2] == '1' then
  if redis.call('GET', KEYS[2]) ~= ARGV[1] then
    return 0
  end
  local stamp = tonumber(string.match(ARGV[1], ':(%d+)$'))
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if not stamp or now - stamp < tonumber(ARGV[3]) then
    return 0
  end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
