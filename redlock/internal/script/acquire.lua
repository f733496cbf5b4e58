-- Take the lock on this node: SET NX PX, plus what a fencing client needs,
-- read in the same atomic step, plus the key's line of waiters.
-- KEYS[1] lock key, KEYS[2] fence key, KEYS[3] this node's admission
-- marker, KEYS[4] this attempt's tombstone, KEYS[5] the key's line of
-- waiters, KEYS[6] the waiters a release named (a short reservation),
-- KEYS[7] when this node last saw each waiter in the line (its TIME, us),
-- KEYS[8] the server's identity (ident.lua), KEYS[9] the key's line
-- marker: set while the key may have a line here, so that a call finds the
-- line absent in the MGET it makes anyway, KEYS[10] (only with ARGV[8])
-- the key's holder metadata
-- ARGV[1] our random value, ARGV[2] ttl in ms,
-- ARGV[3] the deployment settings this client runs with ('' skips the
-- admission check: WithoutRestartQuarantine),
-- ARGV[4] '1' to return the fence value and the server time,
-- ARGV[5] the waiter id of a Lock call ('' for TryLock: no line),
-- ARGV[6] how long (ms) a Lock call stays in line without being seen
-- again (a join, or a release script's "back in place"): it is dropped
-- when someone joins or a release names the first in line,
-- ARGV[7] the waiter's place in line: when its Lock call began (us, the
-- caller's clock), the same on every node, so the line has one order; a
-- call that takes hand-offs has it in its id too ('...~<place>+<ttl ms>'),
-- ARGV[8] (optional) the caller's metadata: where this grants, KEYS[10]
-- becomes our value, a newline and it, with the lock key's expiry. It is
-- written after the grant is decided and never read here: metadata plays
-- no part in who gets the key (docs/protocol.md, "Holder metadata").
-- Returns {status, pttl, fence, seconds, microseconds, ident} or
-- {status, 0, marker, ident} or {status, pttl, ident}, where ident, last in
-- every reply, is the identity of the server that ran the call ('' for a
-- server with none: new, or it lost its data): the client counts a grant
-- only from the server its entry of the node list was proven to reach
-- (docs/protocol.md, "One server, one vote"):
--   status 1 taken by us (or already ours), 0 held by another value
--   (pttl: its remaining ms),
--   -1 not admitted (the node lost its state and has not served a
--   quarantine), -2 admitted under other settings (the marker is returned),
--   -3 this attempt was already given up here (a release came first),
--   -4 free, but a release just named other waiters (for a few ms: the
--   reservation's pttl is returned); a Lock joins the line,
--   -5 a release handed the key to this Lock call (ARGV[5]): it holds
--   the waiter id, and the call counts it towards a lease of its own,
--   -6 held, by a key handed to a Lock call ahead of this one in line
--   (pttl: its remaining ms); the call joins the line as with 0.
-- This script grants only by SET NX; the line decides who tries first,
-- and a release may hand the key to the first in line (release.lua).
-- Only calls that take hand-offs (unfenced: ids ending in '+<ttl ms>')
-- get -5 or -6.
-- The control keys, the server's identity and the line marker are read in
-- one MGET: the script is atomic and writes none of them before it reads
-- them, so this is the same as reading each where it is used.
local ctl = redis.call('MGET', KEYS[3], KEYS[4], KEYS[6], KEYS[8], KEYS[9])
local function reply(r)
  r[#r + 1] = ctl[4] or ''
  return r
end
if ARGV[3] ~= '' then
  local m = ctl[1]
  if not m then
    return reply({-1, 0})
  end
  if m ~= ARGV[3] then
    return reply({-2, 0, m})
  end
end
if ctl[2] then
  return reply({-3, 0})
end
local id = ARGV[5]
-- Joining the line first drops the waiters this node has not seen for
-- ARGV[6] ms (a live one is seen at each failed attempt, and one that
-- was dropped joins again, in its place, when its next attempt fails),
-- then takes the call's place, or keeps the one it has, and notes that the
-- call was seen now. The place orders the line; only the last sight ends
-- a waiter's stay, so a call that has waited long keeps its place for as
-- long as it keeps trying. Every join sets the line marker (KEYS[9]) with
-- the line's expiry, so a key with no marker has no line here: a grant
-- then touches no line at all, and the uncontended path pays for no line
-- upkeep (docs/protocol.md, "The line marker").
-- drop is the same in release.lua: an entry with no last sight (put in
-- line by an older client's script) counts as seen when its call began,
-- as such a client's scripts count it.
local function drop(line, seen, cut)
  local gone = redis.call('ZRANGEBYSCORE', seen, '-inf', cut)
  for _, w in ipairs(gone) do
    redis.call('ZREM', line, w)
  end
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', seen, '-inf', cut)
  end
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', line, '-inf', cut)) do
    if not redis.call('ZSCORE', seen, w) then
      redis.call('ZREM', line, w)
    end
  end
end
local function join()
  if id ~= '' then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    drop(KEYS[5], KEYS[7], now - tonumber(ARGV[6]) * 1000)
    redis.call('ZADD', KEYS[5], 'NX', ARGV[7], id)
    redis.call('ZADD', KEYS[7], now, id)
    redis.call('PEXPIRE', KEYS[5], ARGV[6])
    redis.call('PEXPIRE', KEYS[7], ARGV[6])
    redis.call('SET', KEYS[9], '1', 'PX', ARGV[6])
  end
end
local named = ctl[3]
if named and (id == '' or not string.find(' ' .. named .. ' ', ' ' .. id .. ' ', 1, true)) then
  join()
  return reply({-4, redis.call('PTTL', KEYS[6])})
end
local status, pttl = 1, 0
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local cur = redis.call('GET', KEYS[1])
  if id ~= '' and cur == id then
    -- A release handed the key to this Lock call (release.lua): it stays
    -- so, and the call counts this node towards a lease of its own; an
    -- attempt never takes over or changes a handed key.
    return reply({-5, redis.call('PTTL', KEYS[1])})
  end
  if cur ~= ARGV[1] then
    status = 0
    pttl = redis.call('PTTL', KEYS[1])
    -- Handed to another Lock call whose place is ahead of ours (ids of
    -- calls that take hand-offs end in '~<place>+<ttl ms>'; an id of our
    -- own call, from before it gave keys back, has our place): a call
    -- that holds handed keys of its own gives them back when it sees
    -- this, so that calls the releases split the nodes between settle in
    -- line order.
    if cur and string.find(id, '+', 1, true) then
      local p, q = tonumber(string.match(cur, '~(%d+)%+%d+$')), tonumber(ARGV[7])
      if p and p < q then
        status = -6
      end
    end
  end
  -- else a retried call whose first run took the key: it is ours, and 0
  -- must mean that this value does not hold the key here (the failed
  -- attempt's cleanup skips the nodes that answered 0)
end
if status == 1 then
  local md = ARGV[8]
  if md and md ~= '' then
    local left = redis.call('PTTL', KEYS[1])
    if left > 0 then
      redis.call('SET', KEYS[10], ARGV[1] .. '\n' .. md, 'PX', left)
    end
  end
  if named then
    redis.call('DEL', KEYS[6])
  end
  -- a call's last sight is kept only while it is in line, and it can be
  -- in line only where the key has a line marker
  if id ~= '' and ctl[5] and redis.call('ZREM', KEYS[5], id) > 0 then
    redis.call('ZREM', KEYS[7], id)
    if #redis.call('ZRANGE', KEYS[5], 0, 0) == 0 then
      -- the line emptied with it: so goes its marker
      redis.call('DEL', KEYS[9])
    end
  end
else
  join()
end
if ARGV[4] ~= '1' then
  return reply({status, pttl})
end
local t = redis.call('TIME')
return reply({status, pttl, redis.call('GET', KEYS[2]) or '0', tonumber(t[1]), tonumber(t[2])})
