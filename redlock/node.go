package redlock

import (
	"context"
	"errors"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// node is one entry of the node list: the client given to New, and its
// record of missed deadlines.
type node struct {
	idx  int
	name string // the address the caller configured, for errors and logs only
	uc   redis.UniversalClient
	sn   *script.Node // runs the scripts on uc

	// missed is set when a call to the node ran out of time and cleared by
	// its next answer. An acquisition that can only succeed if a node that
	// missed its last deadline answers in time gives up without waiting.
	missed atomic.Bool
}

// observe records the outcome of one call to node i for missed: a reply,
// even one the script could not have sent, is an answer in time.
func (c *Client) observe(i int, err error) {
	switch {
	case err == nil || isReplyError(err):
		c.nodes[i].missed.Store(false)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		c.nodes[i].missed.Store(true)
	}
}

// missedLast reports whether node i missed the deadline of its last call.
func (c *Client) missedLast(i int) bool { return c.nodes[i].missed.Load() }

// isReplyError reports a reply the script could not have sent. Apart
// from observe, which runs on every call, so that a call without an error
// does not pay for the target errors.As needs on the heap.
func isReplyError(err error) bool {
	var bad *script.ReplyError
	return errors.As(err, &bad)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (c *Client) nodeErr(i int, err error) *NodeError {
	if !errors.Is(err, ErrNodeHeld) && !errors.Is(err, ErrNodeQuarantined) {
		c.inst.nodeError(c.nodes[i].name)
	}
	return &NodeError{Node: i, Addr: c.nodes[i].name, Err: err}
}
