-- Fencing commit: raise the fence to our token, but only while this node
-- still holds our lock value. Tokens are compared as decimal strings (longer
-- is larger, then lexicographic) so that values beyond 2^53 stay exact;
-- Lua numbers are doubles.
-- KEYS[1] lock key, KEYS[2] fence key; ARGV[1] our value, ARGV[2] token
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local cur = redis.call('GET', KEYS[2])
local t = ARGV[2]
if not cur or #cur < #t or (#cur == #t and cur < t) then
  redis.call('SET', KEYS[2], t)
end
return 1
