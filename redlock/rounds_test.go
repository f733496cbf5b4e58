package redlock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// TestTryLock_ABurstOnManyKeysWaitsInTheClientNotInTheNodesQueues starts
// 8 x maxRounds TryLocks on distinct keys at once against nodes that take
// 60 ms over every acquire batch. Queued in the nodes' batchers all at
// once, the calls beyond the first few batches would wait past the node
// timeout (300 ms) and fail, though every key is free; with at most
// maxRounds rounds in flight the rest wait in the Client, before their
// attempt starts, and every one of them is granted.
func TestTryLock_ABurstOnManyKeysWaitsInTheClientNotInTheNodesQueues(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	f.delay(60*time.Millisecond, "acquire")
	ctx := context.Background()
	key := testenv.Key(t)
	n := 8 * maxRounds
	leases := make([]*Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { leases[i], errs[i] = c.TryLock(ctx, fmt.Sprintf("%s:%d", key, i), 10*time.Second) })
	}
	wg.Wait()
	f.heal()
	failed, first := 0, error(nil)
	for i, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
			continue
		}
		require.NoError(t, leases[i].Release(ctx))
	}
	require.Zerof(t, failed, "%d of %d TryLocks on free keys failed; the first: %v", failed, n, first)
}
