package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// Release calls that wait in a node's queue for longer than the cleanup
// timeout still go out once the node can take them, as long as the key
// may still be there: a Release that gives up waiting for its replies
// does not take back the delete it asked for. Every node is frozen while
// twelve leases of 20 s are released together, with a cleanup timeout of
// 300 ms: each node takes two calls directly and one pipeline, and the
// rest wait behind them until the Releases have all returned
// unconfirmed. Once the nodes are thawed every key must be gone within
// requireGone's two seconds, not after its ttl.
//
// Guards against: the keys of a release flood staying held for their
// whole ttl. A node's batcher left out every queued call whose ctx had
// ended, and a release's ctx is its cleanup timeout: in a flood (100,000
// Do calls returning together on two busy cores) or behind a slow node,
// the calls queued past it were never sent, and a waiter for those keys
// waited out the ttl.
func TestRelease_CallsQueuedPastTheCleanupTimeoutStillGoOut(t *testing.T) {
	cl := newCluster(t, 5)
	const ttl = 20 * time.Second
	c, _ := cl.ready(t, WithCleanupTimeout(300*time.Millisecond))
	ctx := context.Background()
	// The release script is cached on the nodes first: a NOSCRIPT reply
	// to a call nobody waits for any more is not sent again with its
	// source.
	warm, err := c.Lock(ctx, testenv.Key(t)+"-warm", ttl)
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))

	base := testenv.Key(t)
	leases := make([]*Lease, 12)
	for i := range leases {
		leases[i], err = c.Lock(ctx, fmt.Sprintf("%s-%d", base, i), ttl)
		require.NoError(t, err)
	}
	cl.freeze(t, cl.all()...)
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, l := range leases {
		wg.Go(func() { errs[i] = l.Release(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		var re *ReleaseError
		require.True(t, errors.As(err, &re), "lease %d: Release returned %v, want unconfirmed: the nodes were frozen", i, err)
		require.Equal(t, 0, re.Confirmed, "lease %d", i)
	}
	cl.thaw(t, cl.all()...)
	// How many keys some node still holds.
	left := func() int {
		n := 0
		for i := range leases {
			for _, v := range cl.values(t, cl.all(), fmt.Sprintf("%s-%d", base, i)) {
				if v != "" {
					n++
					break
				}
			}
		}
		return n
	}
	var stayed int
	if !assert.Eventually(t, func() bool { stayed = left(); return stayed == 0 }, 2*time.Second, 5*time.Millisecond) {
		stayed = left()
	}
	require.Zero(t, stayed, "%d of %d keys stayed after their releases were queued past the cleanup timeout", stayed, len(leases))
}
