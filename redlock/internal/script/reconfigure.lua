-- Reconfigure (Client.Reconfigure): move a live deployment from its
-- settings S to new settings T (another max ttl, drift factor or node
-- list) so that no client of S and client of T can hold one key at once
-- (docs/reconfiguration.md, "Changing the settings of a live deployment").
-- KEYS[1] admission marker, KEYS[2] pending mark (a hash), KEYS[3] the
-- change record: which change marked the node (S, T and the identities of
-- the new nodes, script.ChangeRecord). Every step that marks a node writes
-- it, and it stays once the node is admitted with T, so that a rerun tells
-- its own marks from another change's, and a node this change finished
-- from one that carried T before it (another deployment's).
-- ARGV[1] the step: 'refuse', 'retire', 'hold' or 'finish';
-- ARGV[2] the old settings S, ARGV[3] the new settings T, ARGV[4] the
-- change record (not with 'finish').
-- Two markers that no client's settings equal: 'reconfiguring to T' (a
-- node that stays or joins: every client of S is refused, a client of T
-- waits for the hold-off) and 'retired, reconfigured to T' (a node that
-- leaves: every client is refused).
--
-- A node this change may move carries S, no marker (a new node, or one
-- that lost its data: a quarantine of S in progress would admit it under
-- S), or this change's own marks (its record). Anything else, another
-- change's marks included, is not touched: {-2, marker}. A node admitted
-- with T by this change (T ~= S, its record) answers {2}.
--
-- refuse / retire (step 1, on the old nodes, and refuse on the nodes that
-- join): write the marker for a node that stays or joins / leaves. A node
-- already reconfiguring to T keeps its state (and any hold-off). Returns
-- {1} marked now or before.
--
-- hold (step 2, on the new nodes, only once step 1 is done): mark the
-- node 'reconfiguring to T' with a hold-off stamped on its own clock: the
-- pending mark {id, stamp, settings T, quarantine, reconfigure}. A node
-- that carries a hold-off of T already keeps it (a rerun: the stamp was
-- written after an earlier step 1, which is what the hold-off counts
-- from). ARGV[5] the hold-off in us, ARGV[6] the mark's ttl in ms,
-- ARGV[7] a fresh id. Returns {1, left us}.
--
-- finish (any client of T, or the command): admit the node with T once
-- its hold-off is over on its own clock. Returns {1} admitted (now or
-- before), {0, left us} still holding off, {0, -1} reconfiguring but no
-- hold-off (step 2 has not reached it: the command stopped), {-2, marker}
-- anything else (no marker: the node lost its data, and serves an
-- ordinary quarantine).
local m = redis.call('GET', KEYS[1])
local S, T = ARGV[2], ARGV[3]
local moving = 'reconfiguring to ' .. T
local function held()
  if m ~= moving then
    return nil
  end
  local p = redis.call('HMGET', KEYS[2], 'stamp', 'settings', 'quarantine', 'reconfigure')
  if p[4] ~= '1' or p[2] ~= T then
    return nil
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return tonumber(p[1]) + tonumber(p[3]) - now
end
local step = ARGV[1]
if step == 'finish' then
  if m == T then
    return {1}
  end
  if m ~= moving then
    return {-2, m or ''}
  end
  local left = held()
  if not left then
    return {0, -1}
  end
  if left > 0 then
    return {0, left}
  end
  redis.call('SET', KEYS[1], T)
  redis.call('DEL', KEYS[2])
  return {1}
end
local R = ARGV[4]
local ours = redis.call('GET', KEYS[3]) == R
if m == T and T ~= S then
  if ours then
    return {2}
  end
  return {-2, m}
end
if m and m ~= S then
  local marked = string.sub(m, 1, 17) == 'reconfiguring to ' or string.sub(m, 1, 8) == 'retired,'
  if not (marked and ours) then
    return {-2, m}
  end
end
if step == 'hold' then
  local left = held()
  if left then
    return {1, math.max(left, 0)}
  end
  local t = redis.call('TIME')
  redis.call('SET', KEYS[1], moving)
  redis.call('SET', KEYS[3], R)
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'id', ARGV[7], 'stamp', t[1] .. string.format('%06d', tonumber(t[2])),
    'settings', T, 'quarantine', ARGV[5], 'reconfigure', '1')
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  return {1, tonumber(ARGV[5])}
end
local want = moving
if step == 'retire' then
  want = 'retired, reconfigured to ' .. T
end
if m == want or m == moving then
  return {1}
end
redis.call('SET', KEYS[1], want)
redis.call('SET', KEYS[3], R)
redis.call('DEL', KEYS[2])
return {1}
