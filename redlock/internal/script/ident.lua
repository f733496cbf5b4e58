-- A node's identity for telling two entries of a client's node list that
-- reach one server apart (host name and IP, two addresses of one proxy):
-- the first call on a server writes a random id, every later call, through
-- any name, reads the same one. One key per server, no expiry; a server
-- that lost its data gets a new id at its next proof. The acquire, extend
-- and commit scripts and a release's hand-off notice read the id too, and
-- a client counts their answers only where it is the one the entry was
-- proven with (docs/protocol.md, "One server, one vote"), so a name
-- re-pointed to another server, or a server that lost its data, counts
-- for nothing until it is proven again.
-- KEYS[1] the identity key; ARGV[1] a fresh random id
-- Returns the server's id.
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
