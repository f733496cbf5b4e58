package redlock

import (
	"errors"
	"fmt"
)

var (
	// ErrNotObtained reports that a lock was not acquired: another owner
	// holds it, fewer than a majority of nodes answered, or the round took
	// so long that no validity was left. The per-node causes are joined to
	// it as *NodeError values; on cancellation ctx.Err() is joined too.
	ErrNotObtained = errors.New("redlock: lock not obtained")

	// ErrNotHeld reports that Extend or Release found the lease already
	// expired, released, or taken over on a majority of nodes. A lease that
	// returned it must not be used to act as the lock holder.
	ErrNotHeld = errors.New("redlock: lease not held")

	// ErrNodeHeld is the per-node cause when a node's key holds another
	// owner's value.
	ErrNodeHeld = errors.New("held by another owner")

	// ErrNodeQuarantined is the per-node cause when a node lost its state
	// (restarted without persistence, failed over, flushed) and may not vote
	// until one maximum TTL plus drift has passed.
	ErrNodeQuarantined = errors.New("node restarted and is in quarantine")

	// ErrMaxHold is wrapped into Do's error (and the cause of fn's ctx) when
	// the lease ended because WithMaxHold stopped its renewal.
	ErrMaxHold = errors.New("redlock: max hold time reached")

	// ErrClosed is returned by calls on a Client after Close.
	ErrClosed = errors.New("redlock: client closed")
)

// NodeError is one node's part in a failed round. Err is the transport
// error, ErrNodeHeld, ErrNodeQuarantined or a context error. Match it with
// errors.As; it unwraps to Err.
type NodeError struct {
	Node int    // index of the node in the slice given to New
	Addr string // the node's address, when the client knows it
	Err  error
}

func (e *NodeError) Error() string {
	if e.Addr != "" {
		return fmt.Sprintf("redlock: node %d (%s): %v", e.Node, e.Addr, e.Err)
	}
	return fmt.Sprintf("redlock: node %d: %v", e.Node, e.Err)
}

func (e *NodeError) Unwrap() error { return e.Err }
