package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// Close: what happens to waiting calls, leases and hand-offs of a Client
// that closes.

// From a review: a Lock waiting in this Client's line when Close is called must not
// get a lease afterwards (it could be neither renewed nor looked after).
func TestClose_ALockWaitingGetsNoLease(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	c := cl.client(t)
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	// Long enough that the first lease outlives the setup on a loaded
	// machine: the waiter must still be waiting when Close comes.
	l1, err := c.Lock(ctx, key, 2*time.Second)
	require.NoError(t, err)
	type res struct {
		l   *Lease
		err error
	}
	waiting := make(chan res, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l, err := c.Lock(lctx, key, 500*time.Millisecond)
		waiting <- res{l, err}
	}()
	// The waiter is in this Client's line for the key, behind the lease.
	require.Eventually(t, func() bool { return gateRefs(c, key) == 2 }, 3*time.Second, time.Millisecond,
		"the waiter never queued behind the lease")
	require.NoError(t, c.Close())
	// The key goes away on the nodes (an operator, or its expiry): when the
	// first lease's deadline passes, nothing would stop a waiter's attempt.
	cl.drop(t, key, 0, 1, 2, 3, 4)
	select {
	case r := <-waiting:
		require.Nil(t, r.l, "a Lock got a lease from a closed Client")
		require.ErrorIs(t, r.err, ErrClosed)
	case <-time.After(3 * time.Second):
		t.Fatal("Lock kept waiting after Close")
	}
	time.Sleep(time.Until(l1.Deadline()) + 100*time.Millisecond)
	for i := range 5 {
		require.Empty(t, cl.value(t, i, key), "node %d holds the key after the Client closed", i)
	}
}

// 12, second half: a lease outlives its Client's Close. Its Release still
// deletes the key on every node and says so (Close has closed the Client's
// goroutine pool, so the release round runs on goroutines of its own),
// and leaves nothing running (goleak, in TestMain).
func TestClose_AReleaseAfterCloseDeletesEverywhere(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	c, err := New(testenv.Clients(t, cl.nodes))
	require.NoError(t, err)
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	l, err := c.Lock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	// the extend round, through the pool before Close and after it
	require.NoError(t, l.Extend(ctx, 5*time.Second))
	require.NoError(t, c.Close())
	done := make(chan error, 2)
	go func() {
		done <- l.Extend(ctx, 5*time.Second)
		done <- l.Release(ctx)
	}()
	for _, what := range []string{"an Extend", "the Release"} {
		select {
		case err := <-done:
			require.NoError(t, err, "%s after Close", what)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s after Close did not return", what)
		}
	}
	for i := range 5 {
		require.Empty(t, cl.value(t, i, key), "node %d kept the key after a Release that followed Close", i)
	}
}

// From a red-team review: a Client closed while one of its Lock calls was
// being handed the key (the release set the key to the call's id on every
// node) left the key holding that id for its whole ttl: the closing
// call's lease was refused, so it gave the keys back under a new id, but
// the give-back and the line-leave were skipped once the Client was
// closed. Another client then waited out the ttl (8 s) for a key nobody
// held. After Close the call must still leave the line with the id the
// keys hold, which deletes them.
func TestClose_DuringAHandOffLeavesTheKeyFree(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	const ttl = 8 * time.Second
	var armed atomic.Bool
	inside := make(chan struct{})
	var once sync.Once
	h := cl.client(t)
	a, f := cl.faulty(t, WithKeyHandOff(), WithNodeTimeout(time.Second),
		WithRetry(func(int) time.Duration { return 200 * time.Millisecond }, 0))
	f.before(func(_ context.Context, c *call) error {
		if c.Script == "acquire" && isTestKey(c.Keys[0]) && armed.Load() {
			once.Do(func() { close(inside) })
			time.Sleep(150 * time.Millisecond)
		}
		return nil
	})
	require.NoError(t, h.Bootstrap(ctx))
	key := testenv.Key(t)
	lh, err := h.TryLock(ctx, key, ttl)
	require.NoError(t, err)
	settled(t, h, 2*time.Second) // the key is on every node before a tries

	errA := make(chan error, 1)
	go func() {
		l, err := a.Lock(ctx, key, ttl)
		if l != nil {
			t.Error("a closed Client's Lock returned a lease")
		}
		errA <- err
	}()
	cl.requireLineLen(t, key, 1, "a never joined the line")
	// a's next attempt is on its way (its calls held back 150 ms) when h's
	// release hands the key to a on every node and a's Client closes.
	armed.Store(true)
	select {
	case <-inside:
	case <-time.After(3 * time.Second):
		t.Fatal("a sent no attempt")
	}
	require.NoError(t, lh.Release(ctx))
	for i := range 5 { // Release returns at a majority; the rest lands just after
		require.Eventually(t, func() bool { return handedTo(cl.value(t, i, key)) },
			2*time.Second, 2*time.Millisecond, "node %d did not hand the key to a", i)
	}
	require.NoError(t, a.Close())
	select {
	case err := <-errA:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(3 * time.Second):
		t.Fatal("Lock kept waiting after Close")
	}

	b := cl.client(t)
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	lb, err := b.Lock(lctx, key, ttl)
	for i := range 5 {
		if v := cl.value(t, i, key); err != nil {
			t.Logf("node %d holds %q", i, v)
		}
	}
	require.NoError(t, err, "the closed Client's call left the key to its id")
	require.Less(t, time.Since(start), time.Second, "the key was free only after a while")
	require.NoError(t, lb.Release(ctx))
}

// A short-lived process (a cron job) with one node frozen does not wait
// a cleanup timeout in Close: the release's call to the node that missed
// its deadline (New's probe did not hear from it) is bounded by the node
// timeout, and Close, which waits for it, returns soon after. The cleanup
// timeout here is far above that bound, so that waiting it out shows.
// From a newcomer's review: 3.1 s per run with one node stopped, against
// 0.05 s healthy.
func TestClose_AShortLivedClientDoesNotWaitOutAFrozenNode(t *testing.T) {
	cl := newCluster(t, 5)
	const cleanup = 10 * time.Second
	boot, _ := cl.ready(t)
	require.NoError(t, boot.Close())
	cl.freeze(t, 4)
	ctx := context.Background()

	c, _ := cl.build(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true },
		WithProbeTimeout(300*time.Millisecond), WithCleanupTimeout(cleanup))
	l, err := c.TryLock(ctx, testenv.Key(t), 2*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	start := time.Now()
	require.NoError(t, c.Close())
	require.Less(t, time.Since(start), cleanup/4, "Close waited for the release's call to the frozen node")
}

// A failed attempt's cleanup on nodes that refuse connections: its
// releases to them get the down wait, as a lease's Release does, not the
// cleanup timeout, so Close, which waits for them, returns soon after.
func TestClose_AFailedAttemptOnDownNodesDoesNotHoldClose(t *testing.T) {
	cl := newCluster(t, 5)
	const cleanup = 10 * time.Second
	boot, _ := cl.ready(t)
	require.NoError(t, boot.Close())
	for _, i := range []int{2, 3, 4} {
		require.NoError(t, cl.nodes[i].Kill())
	}
	ctx := context.Background()
	c, _ := cl.build(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true },
		WithProbeTimeout(300*time.Millisecond), WithCleanupTimeout(cleanup))
	_, err := c.TryLock(ctx, testenv.Key(t), 2*time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	start := time.Now()
	require.NoError(t, c.Close())
	// With the down wait (the node timeout here, 300 ms) Close took 0.6 s;
	// before, with the cleanup timeout, 2.0 s, go-redis's own dial
	// retries ending the releases before the 10 s did.
	took := time.Since(start)
	require.Less(t, took, 1500*time.Millisecond, "Close waited %v for the failed attempt's releases to the nodes that refuse connections", took)
}
