// Package quorum implements majority arithmetic and the parallel fan-out of
// one request to N independent nodes that a Redlock round needs.
//
// A Round starts one goroutine per node and lets the caller wait only until
// the outcome is decided (enough successes, or so many failures that success
// is impossible), instead of until the slowest node answers. The goroutines
// still belong to the Round: Wait blocks until every one of them has
// returned and hands back the replies that arrived after the decision, so the
// caller can clean up after stragglers (for example release a lock a slow
// node granted after the attempt had already failed). Given a Pool, Start
// and StartOwned run the calls on its goroutines instead of new ones: a
// goroutine kept from an earlier round has already grown the stack a
// client call needs. The Round's guarantees are the same either way.
package quorum
