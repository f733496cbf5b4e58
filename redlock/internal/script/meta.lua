-- Store the holder metadata of a Lock call that a release handed the key
-- to (release.lua sets the key to the call's waiter id and cannot know
-- its metadata): only where the lock key holds ARGV[1], with the lock
-- key's remaining life. It writes no other key, so it cannot change who
-- holds the lock (docs/protocol.md, "Holder metadata").
-- KEYS[1] lock key, KEYS[2] its metadata key; ARGV[1] the holder's value
-- (its waiter id), ARGV[2] the metadata
-- Returns 1 stored, 0 the key does not hold ARGV[1] here.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local left = redis.call('PTTL', KEYS[1])
if left <= 0 then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1] .. '\n' .. ARGV[2], 'PX', left)
return 1
