-- Take the lock on this node: SET NX PX, plus what a fencing client needs,
-- read in the same atomic step.
-- KEYS[1] lock key, KEYS[2] fence key, KEYS[3] this node's admission
-- marker, KEYS[4] this attempt's tombstone
-- ARGV[1] our random value, ARGV[2] ttl in ms,
-- ARGV[3] the deployment settings this client runs with ('' skips the
-- admission check: WithoutRestartQuarantine),
-- ARGV[4] '1' to return the fence value and the server time
-- Returns {status, pttl, fence, seconds, microseconds} or {status, 0, marker}:
--   status 1 taken by us, 0 held by another value (pttl: its remaining ms),
--   -1 not admitted (the node lost its state and has not served a
--   quarantine), -2 admitted under other settings (the marker is returned),
--   -3 this attempt was already given up here (a release came first).
if ARGV[3] ~= '' then
  local m = redis.call('GET', KEYS[3])
  if not m then
    return {-1, 0}
  end
  if m ~= ARGV[3] then
    return {-2, 0, m}
  end
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  return {-3, 0}
end
local status, pttl = 1, 0
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  status = 0
  pttl = redis.call('PTTL', KEYS[1])
end
if ARGV[4] ~= '1' then
  return {status, pttl}
end
local t = redis.call('TIME')
return {status, pttl, redis.call('GET', KEYS[2]) or '0', tonumber(t[1]), tonumber(t[2])}
