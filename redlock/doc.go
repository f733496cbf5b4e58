// Package redlock implements the Redlock distributed lock over N
// independent Redis primaries (normally five), with optional fencing
// tokens that grow with the order in which holders obtained the lock.
//
// A lock is granted when a majority of nodes (3 of 5) accept SET NX PX in
// one parallel round, and is trusted for ttl - elapsed - drift, where
// elapsed is measured on the monotonic clock from the start of the round to
// the reply that decided it. The client does not wait for slow nodes, and
// never leaves a key behind after a failed attempt: it releases on every
// node, including those that did not answer, detached from the caller's
// context.
//
// A TTL lock cannot stop a holder that pauses past its validity (GC, a
// frozen process, a delayed network write) from acting as the holder
// afterwards. Resources that must stay safe then should check the lease's
// FencingToken (WithFencing), for example with package fencing.
//
// Nodes that lose their data (restart without persistence, failover,
// FLUSHALL) are kept from voting until one maximum TTL plus drift has
// passed, so they cannot grant a lock they forgot; see WithMaxTTL. Run the
// nodes with maxmemory-policy noeviction: an evicted lock key is a forgotten
// lock.
//
// The keys quorumlock writes besides the caller's lock key are
// KEY:quorumlock:fence (fencing), quorumlock:admitted, quorumlock:pending
// and quorumlock:members (restart quarantine). Waiters are woken through
// Pub/Sub on the channel quorumlock:released:KEY.
//
// go-redis clients only honour context deadlines on the socket when built
// with ContextTimeoutEnabled. With default clients an unresponsive node
// still cannot delay a round (the client returns at quorum or at the
// per-node timeout), but the call to it runs on in the background until
// the client's ReadTimeout; Client.Close waits for such calls.
package redlock
