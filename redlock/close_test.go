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

// universal returns rc's raw clients as redis.UniversalClient.
func (rc *realCluster) universal() []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(rc.raw))
	for i, c := range rc.raw {
		out[i] = c
	}
	return out
}

// From a red-team review: a Client closed while one of its Lock calls was
// being handed the key (the release set the key to the call's id on every
// node) left the key holding that id for its whole ttl: the closing
// call's lease was refused, so it gave the keys back under a new id, but
// the give-back and the line-leave were skipped once the Client was
// closed. Another client then waited out the ttl (8 s) for a key nobody
// held. After Close the call must still leave the line with the id the
// keys hold, which deletes them.
func TestLock_CloseDuringAHandOffLeavesTheKeyFree(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	ucs := rc.universal()
	const ttl = 8 * time.Second
	var armed atomic.Bool
	inside := make(chan struct{})
	var once sync.Once
	slow := func(i int, sc redis.Scripter) redis.Scripter {
		return hookScripter{Scripter: sc, before: func(_ context.Context, script string, keys []string, _ []any) *redis.Cmd {
			if script == "acquire" && isTestKey(keys[0]) && armed.Load() {
				once.Do(func() { close(inside) })
				time.Sleep(150 * time.Millisecond)
			}
			return nil
		}}
	}
	h := rc.client(t, nil, nil)
	a := rc.client(t, slow, nil, WithKeyHandOff(), WithNodeTimeout(time.Second),
		WithRetry(func(int) time.Duration { return 200 * time.Millisecond }, 0))
	require.NoError(t, h.Bootstrap(ctx))
	key := testenv.Key(t)
	lh, err := h.TryLock(ctx, key, ttl)
	require.NoError(t, err)

	errA := make(chan error, 1)
	go func() {
		l, err := a.Lock(ctx, key, ttl)
		if l != nil {
			t.Error("a closed Client's Lock returned a lease")
		}
		errA <- err
	}()
	requireLineLen(t, ucs, key, 1, "a never joined the line")
	// a's next attempt is on its way (its calls held back 150 ms) when h's
	// release hands the key to a on every node and a's Client closes.
	armed.Store(true)
	select {
	case <-inside:
	case <-time.After(3 * time.Second):
		t.Fatal("a sent no attempt")
	}
	require.NoError(t, lh.Release(ctx))
	for i := range 5 {
		require.Contains(t, rc.value(t, i, key), "~", "node %d did not hand the key to a", i)
	}
	require.NoError(t, a.Close())
	select {
	case err := <-errA:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(3 * time.Second):
		t.Fatal("Lock kept waiting after Close")
	}

	b := rc.client(t, nil, nil)
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	lb, err := b.Lock(lctx, key, ttl)
	for i := range 5 {
		if v := rc.value(t, i, key); err != nil {
			t.Logf("node %d holds %q", i, v)
		}
	}
	require.NoError(t, err, "the closed Client's call left the key to its id")
	require.Less(t, time.Since(start), time.Second, "the key was free only after a while")
	require.NoError(t, lb.Release(ctx))
}
