-- Fencing commit: raise the fence to our token, but only while this node
-- still holds our lock value. Tokens are compared as decimal strings (longer
-- is larger, then lexicographic) so that values beyond 2^53 stay exact;
-- Lua numbers are doubles.
-- The fence expires: it is kept at least ARGV[3] ms after this commit (the
-- lease's ttl plus the deployment's quarantine), never shortened, so that a
-- key locked once leaves nothing behind for ever. A fence that expired is
-- read as missing, and the time floor keeps the next token above this one
-- (docs/protocol.md, "Fences expire").
-- KEYS[1] lock key, KEYS[2] fence key, KEYS[3] the server's identity
-- (ident.lua); ARGV[1] our value, ARGV[2] token, ARGV[3] how long (ms) the
-- fence is kept at least
-- Returns {1, ident} when the key holds our value (the fence is at least
-- the token now), else {0, ident}; ident is the identity of the server
-- ('' for none): the client counts a commit only from the server its entry
-- of the node list was proven to reach (docs/protocol.md, "One server, one
-- vote").
local ident = redis.call('GET', KEYS[3]) or ''
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0, ident}
end
local cur = redis.call('GET', KEYS[2])
local t = ARGV[2]
local keep = tonumber(ARGV[3])
local pttl = redis.call('PTTL', KEYS[2])
if not cur or #cur < #t or (#cur == #t and cur < t) then
  redis.call('SET', KEYS[2], t, 'PX', math.max(keep, pttl))
elseif pttl < keep then
  -- a fence without an expiry (written before fences expired) gets one
  redis.call('PEXPIRE', KEYS[2], keep)
end
return {1, ident}
