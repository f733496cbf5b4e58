-- Compare-and-delete: remove the lock only if it still holds our value
-- (or, when a Lock call ends or gives keys back, its own waiter id: a key
-- a release handed to it), and hand the free key to the first Lock call in
-- the key's line (KEYS[3]). A call whose id ends in '+<ttl ms>' gets the
-- key itself: it is set to the id with that ttl, as the call's SET NX
-- would have been, and the call's Client is told '!id|key'; the call holds
-- the lock once a majority did so (docs/protocol.md, "Hand-off inside the
-- release"). Any other call (fenced, or of an older client) gets a
-- reservation: the free key is kept for it alone for ARGV[5] ms (KEYS[4])
-- and it is told, so that it tries at once while other attempts, the
-- releaser's own next Lock included, go behind it instead of splitting the
-- nodes with it. With nobody in line, tell every waiter of the key ('' on
-- ARGV[2]). If the named call is gone (crashed, frozen), the reservation
-- runs out (a handed key, its ttl) and the others' next tries find the key
-- free; one that gives up while named passes the reservation, or the
-- handed key, on (below). Where the key is not
-- ours and ARGV[3] is not '0', leave a tombstone for our value for ARGV[3]
-- ms: our acquire may still be on its way to this node (its reply was lost
-- or never waited for), and the acquire script refuses a value with a
-- tombstone, so the late SET cannot hold the key after we let go of it.
-- KEYS[1] lock key, KEYS[2] our value's tombstone, KEYS[3] the key's line,
-- KEYS[4] the reservation, KEYS[5] when this node last saw each waiter in
-- the line (see acquire.lua), KEYS[6] (optional) the node's admission
-- marker: see marked below, KEYS[7] (optional, after the marker) the
-- server's identity (ident.lua), named in a hand-off's notice, KEYS[8]
-- the key's line marker (see acquire.lua): where it is absent the key has
-- no line here, and the release touches no line and tells nobody, KEYS[9]
-- (optional, after the marker) the key's holder metadata, deleted with the
-- key
-- ARGV[1] our value; ARGV[2] release channel; ARGV[3] tombstone ttl ms or
-- '0'; ARGV[4] our Lock call's waiter id ('' if none); ARGV[5] the
-- reservation's length in ms; ARGV[6] '' when a lease is released (or
-- a Lock call gives up): the call leaves the line and any reservation
-- that names it; else the call's place, when this cleans up a
-- failed attempt of a Lock that goes on waiting: the acquire script took
-- the call out of the line on the nodes that granted, and it goes back in
-- its old place there, so a split attempt does not send the call to the
-- back of the line (nor name, below, whoever is behind it in its stead);
-- ARGV[7] how long (ms) the line is kept, and how long a Lock call
-- stays in it without being seen (see acquire.lua); ARGV[8] the prefix
-- of the Clients' notice channels (absent: every notice goes to the key's
-- channel);
-- ARGV[9], ARGV[10] (optional) a new waiter id for the call and its
-- place, which the call takes in the line before anything is handed on
-- The lock key, the reservation and the line marker are read in one MGET:
-- nothing below writes the lock key before it is compared, and the script
-- is atomic. lined says the key may have a line here: the marker is set
-- with every place taken in the line, by this script (place) and by
-- acquire.lua (join), with the line's own expiry; without it the line is
-- empty and the uncontended release pays for no line upkeep.
local cur = redis.call('MGET', KEYS[1], KEYS[4], KEYS[8])
local lined = cur[3] and true or false

-- Name the first in line: drop the waiters not seen for ARGV[7] ms first
-- (a live call joins again, in its place, when its next attempt fails),
-- reserve the key for the first, take it out of the line (alive, it tries
-- now and, if it fails, joins again in its old place; gone, it holds the
-- key up for this one reservation only) and tell it: on its Client's own
-- channel (ARGV[8] .. the id's part before the '.') as 'id|key', or, for a
-- waiter id without a Client part (an older client), on the key's channel,
-- which every waiter of the key listens to. With nobody in line, tellAll
-- says whether to tell every waiter of the key that it is free ('').
-- A failed attempt's cleanup (ARGV[6] ~= '') that finds its own call first
-- keeps the key for it but does not tell it, and tells nobody when the
-- line is empty: the call has just lost this attempt, and a notice would
-- send it straight back to win this node and lose the others again, one
-- attempt per round trip until the holder lets go. It tries again when a
-- release elsewhere names it, or after its retry delay (docs/protocol.md,
-- "A cleanup does not wake its own call").
local cleaning = ARGV[4] ~= '' and ARGV[6] ~= ''
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- The same as in acquire.lua: drops the waiters last seen at or before
-- cut, and those with no last sight (an older client's) whose call began
-- then; returns whether it dropped any.
local function drop(line, seen, cut)
  local gone = redis.call('ZRANGEBYSCORE', seen, '-inf', cut)
  local n = #gone
  for _, w in ipairs(gone) do
    redis.call('ZREM', line, w)
  end
  if n > 0 then
    redis.call('ZREMRANGEBYSCORE', seen, '-inf', cut)
  end
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', line, '-inf', cut)) do
    if not redis.call('ZSCORE', seen, w) then
      redis.call('ZREM', line, w)
      n = n + 1
    end
  end
  return n > 0
end
-- leave takes w out of the line, and its last sight with it.
local function leave(w)
  if lined and redis.call('ZREM', KEYS[3], w) > 0 then
    redis.call('ZREM', KEYS[5], w)
  end
end
-- place puts w in the line at place p, or keeps the place it has, and
-- notes that it was seen now.
local function place(w, p)
  redis.call('ZADD', KEYS[3], 'NX', p, w)
  redis.call('ZADD', KEYS[5], now(), w)
  redis.call('PEXPIRE', KEYS[3], ARGV[7])
  redis.call('PEXPIRE', KEYS[5], ARGV[7])
  redis.call('SET', KEYS[8], '1', 'PX', ARGV[7])
  lined = true
end
-- marked reports whether a reconfiguration marked this node (KEYS[6],
-- its admission marker; an older caller sends none): a release there
-- hands no key over, since a handed key is a grant that no acquire script
-- checks (docs/reconfiguration.md, "Changing the settings of a live deployment");
-- the first in line gets a reservation instead, and its own try is refused.
local function marked()
  local m = KEYS[6] and redis.call('GET', KEYS[6])
  return m and (string.sub(m, 1, 17) == 'reconfiguring to ' or string.sub(m, 1, 8) == 'retired,')
end
local function handoff(tellAll)
  if not lined then
    -- No line here, so no waiter of this key that reached this node: a
    -- call whose attempt failed here joined the line, and one whose
    -- cleanup reached it took its place (a waiter dropped for not being
    -- seen, or one whose attempts never got here, tries again after its
    -- retry delay).
    return
  end
  local first = redis.call('ZRANGE', KEYS[3], 0, 0)
  if #first > 0 and drop(KEYS[3], KEYS[5], now() - tonumber(ARGV[7]) * 1000) then
    first = redis.call('ZRANGE', KEYS[3], 0, 0)
  end
  -- A few tries: a first in line whose Client no longer listens is passed
  -- over (below), and the next one is named instead.
  for _ = 1, 4 do
    local w = first[1]
    if w == nil then
      break
    end
    leave(w)
    local cid = string.match(w, '^([^.]+)%.')
    local httl = string.match(w, '%+(%d+)$')
    if httl and tonumber(httl) > 0 and cid and ARGV[8] and not redis.call('GET', KEYS[1]) and not marked() then
      -- A waiter whose id ends in '+<ttl ms>' takes the key itself: set
      -- for it, as its SET NX would have been on the free key, and told
      -- so ('!id server|key', server this server's identity, '' for
      -- none); it holds the lock once a majority of nodes told it, with
      -- no round trip of its own (docs/protocol.md, "Hand-off inside the
      -- release"), each counted only from the server its entry of the
      -- node list was proven to reach ("One server, one vote"). Only if
      -- its Client is subscribed, though: one whose process is gone (its
      -- connection closed) would hold the key up for its ttl.
      local server = KEYS[7] and redis.call('GET', KEYS[7]) or ''
      if redis.call('PUBLISH', ARGV[8] .. cid, '!' .. w .. ' ' .. server .. '|' .. KEYS[1]) > 0 then
        redis.call('SET', KEYS[1], w, 'PX', httl)
        return
      end
      first = redis.call('ZRANGE', KEYS[3], 0, 0)
    else
      redis.call('SET', KEYS[4], w, 'PX', ARGV[5])
      if cleaning and w == ARGV[4] then
        -- kept for the cleaning call, which is not told (above)
      elseif cid and ARGV[8] then
        redis.call('PUBLISH', ARGV[8] .. cid, w .. '|' .. KEYS[1])
      else
        redis.call('PUBLISH', ARGV[2], w)
      end
      return
    end
  end
  if tellAll then
    redis.call('PUBLISH', ARGV[2], '')
  end
end

-- tidy deletes the line marker once the line is empty (a call left, or
-- the last was named), so that the next calls here skip the line again.
local function tidy()
  if lined and #redis.call('ZRANGE', KEYS[3], 0, 0) == 0 then
    redis.call('DEL', KEYS[8])
  end
end

if ARGV[9] then
  -- A Lock call that gives back the keys handed to it and waits on under
  -- a new id (ARGV[9]) takes the same place (ARGV[10]) first, so the line
  -- never lacks it and the give-back below hands each key to whoever is
  -- first by place, which may be the call again.
  place(ARGV[9], ARGV[10])
end
if ARGV[4] ~= '' then
  if ARGV[6] ~= '' then
    place(ARGV[4], ARGV[6])
  else
    leave(ARGV[4])
    -- nor does a reservation keep the key for a call that has left
    local named = cur[2]
    if named and string.find(' ' .. named .. ' ', ' ' .. ARGV[4] .. ' ', 1, true) then
      local rest = {}
      for w in string.gmatch(named, '%S+') do
        if w ~= ARGV[4] then
          rest[#rest + 1] = w
        end
      end
      local pttl = redis.call('PTTL', KEYS[4])
      if #rest == 0 or pttl <= 0 then
        redis.call('DEL', KEYS[4])
        if not cur[1] then
          -- the key is free here and was kept for this call alone: the
          -- next in line gets it, instead of everyone's next poll
          handoff(false)
        end
      else
        redis.call('SET', KEYS[4], table.concat(rest, ' '), 'PX', pttl)
      end
    end
  end
end
if cur[1] == ARGV[1] or (ARGV[4] ~= '' and ARGV[6] == '' and cur[1] == ARGV[4]) then
  redis.call('DEL', KEYS[1])
  if KEYS[9] then
    -- Metadata is written only where the lock key holds its owner, and
    -- that is us: any there is ours, or a leftover of an owner whose key
    -- is gone. Deleting it decides nothing (docs/protocol.md).
    redis.call('DEL', KEYS[9])
  end
  handoff(not cleaning)
  tidy()
  return 1
end
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
end
tidy()
return 0
