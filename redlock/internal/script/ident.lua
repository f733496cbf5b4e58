-- A node's identity for telling two entries of a client's node list that
-- reach one server apart (host name and IP, two addresses of one proxy):
-- the first call on a server writes a random id, every later call, through
-- any name, reads the same one. One key per server, no expiry; a server
-- that lost its data gets a new id, which changes nothing, since entries
-- are compared by the ids they read in one round.
-- KEYS[1] the identity key; ARGV[1] a fresh random id
-- Returns the server's id.
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
