-- Admit a node of a brand-new deployment at once (Client.Bootstrap): only
-- if it has neither a marker nor a pending mark, that is, no client has
-- used it, or found it without its state, since it was last emptied.
-- KEYS[1] admission marker, KEYS[2] pending mark; ARGV[1] settings
-- Returns 1 admitted now, 2 already admitted with these settings,
-- -2 admitted under other settings, -1 a quarantine is in progress.
local m = redis.call('GET', KEYS[1])
if m then
  if m == ARGV[1] then
    return 2
  end
  return -2
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return -1
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
