-- Compare-and-delete: remove the lock only if it still holds our value,
-- and tell the waiters subscribed to ARGV[2] that it is free, naming the
-- first two in the key's line (KEYS[3]) so that only they try (the first
-- at once, the second a moment later, in case the first is gone), or
-- nobody in particular ('') when the line is empty. For ARGV[5] ms the key
-- is reserved for the named (KEYS[4]): other attempts, the releaser's own
-- next Lock included, go behind them instead of splitting the nodes with
-- them. If both are gone, the reservation simply runs out. Where the key is not
-- ours and ARGV[3] is not '0', leave a tombstone for our value for ARGV[3]
-- ms: our acquire may still be on its way to this node (its reply was lost
-- or never waited for), and the acquire script refuses a value with a
-- tombstone, so the late SET cannot hold the key after we let go of it.
-- KEYS[1] lock key, KEYS[2] our value's tombstone, KEYS[3] the key's line,
-- KEYS[4] the reservation
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
-- stays in it (see acquire.lua); ARGV[8] the prefix of the Clients'
-- notice channels (absent: every notice goes to the key's channel)
-- The lock key and the reservation are read in one MGET: nothing below
-- writes the lock key before it is compared, and the script is atomic.
local cur = redis.call('MGET', KEYS[1], KEYS[4])
if ARGV[4] ~= '' then
  if ARGV[6] ~= '' then
    redis.call('ZADD', KEYS[3], 'NX', ARGV[6], ARGV[4])
    redis.call('PEXPIRE', KEYS[3], ARGV[7])
  else
    redis.call('ZREM', KEYS[3], ARGV[4])
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
      else
        redis.call('SET', KEYS[4], table.concat(rest, ' '), 'PX', pttl)
      end
    end
  end
end
if cur[1] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  local first = redis.call('ZRANGE', KEYS[3], 0, 1)
  if #first > 0 then
    -- name nobody whose Lock call began more than ARGV[7] ms ago (a live
    -- one joins again, in its place, when its next attempt fails)
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[7]) * 1000) > 0 then
      first = redis.call('ZRANGE', KEYS[3], 0, 1)
    end
  end
  local next = table.concat(first, ' ')
  if next == '' then
    redis.call('PUBLISH', ARGV[2], '')
    return 1
  end
  redis.call('SET', KEYS[4], next, 'PX', ARGV[5])
  -- the named leave the line: one that is alive tries now and, if it
  -- fails, joins again in its old place; one that is gone (crashed,
  -- frozen) holds the key up for this one reservation only
  redis.call('ZREM', KEYS[3], unpack(first))
  -- The notice goes to the named waiters' Clients only, once each, on
  -- their own channels (ARGV[8] .. the id's part before the '.'), as
  -- 'names|key'; a waiter id without a Client part (an older client) gets
  -- it on the key's channel, which every waiter of the key listens to.
  local sent, bare = {}, false
  for _, w in ipairs(first) do
    local cid = string.match(w, '^([^.]+)%.')
    if cid == nil or ARGV[8] == nil then
      bare = true
    elseif not sent[cid] then
      sent[cid] = true
      redis.call('PUBLISH', ARGV[8] .. cid, next .. '|' .. KEYS[1])
    end
  end
  if bare then
    redis.call('PUBLISH', ARGV[2], next)
  end
  return 1
end
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
end
return 0
