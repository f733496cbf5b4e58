-- Membership records: every node remembers which nodes have been admitted,
-- so a node that comes back empty can be told from a brand-new one.
-- KEYS[1] members hash; ARGV[1] 'get' or 'set', ARGV[2] node name, ARGV[3] value
if ARGV[1] == 'set' then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
  return 1
end
return redis.call('HEXISTS', KEYS[1], ARGV[2])
