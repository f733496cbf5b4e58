package redlock

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The fencing token is 1 + the largest fence among the replies the
// acquisition counted, whichever node it came from and in whatever order
// the replies arrived. The fences here are far above the nodes' clocks in
// µs (about 1.8e15), so the time floor does not decide the token; node 0
// holds the largest and answers first, nodes 1 and 2 answer 100 and 150ms
// later (each call is delayed, so an EVALSHA sent again as EVAL twice),
// giving the grants that make the majority; 3 and 4 answer later still.
//
// Guards against: commit taking the fence of the last counted reply
// (node 2's here) instead of the largest: a token below one an earlier
// holder may have used (node 0's fence), which a fenced resource refuses,
// or one equal to an older holder's, which it accepts.
func TestToken_IsOnePlusTheLargestCountedFence(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	const ttl = 5 * time.Second
	key := testenv.Key(t)
	fences := []uint64{9_000_000_000_009_000, 9_000_000_000_001_001, 9_000_000_000_001_002, 9_000_000_000_001_003, 9_000_000_000_001_004}
	delays := []time.Duration{0, 100 * time.Millisecond, 150 * time.Millisecond, 600 * time.Millisecond, 600 * time.Millisecond}
	var mu sync.Mutex
	var order []int // nodes in the order their acquire replies came back
	slow := func(i int, sc redis.Scripter) redis.Scripter {
		return hookScripter{Scripter: sc,
			before: func(ctx context.Context, script string, keys []string, _ []any) *redis.Cmd {
				if script != "acquire" || keys[0] != key || delays[i] == 0 {
					return nil
				}
				select {
				case <-time.After(delays[i]):
				case <-ctx.Done():
				}
				return nil
			},
			after: func(_ context.Context, script string, keys []string, _ []any, cmd *redis.Cmd) {
				// An EVALSHA answered NOSCRIPT is sent again as EVAL.
				if script == "acquire" && keys[0] == key && (cmd.Err() == nil || !isNoScript(cmd.Err())) {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
				}
			}}
	}
	c := rc.client(t, slow, nil, WithFencing(), WithMaxTTL(ttl), WithNodeTimeout(2*time.Second))
	require.NoError(t, c.Bootstrap(ctx))
	for i, f := range fences {
		require.NoError(t, rc.raw[i].Set(ctx, script.FenceKey(key), strconv.FormatUint(f, 10), 0).Err())
	}

	l, err := c.TryLock(ctx, key, ttl)
	require.NoError(t, err)
	mu.Lock()
	got := append([]int(nil), order...)
	mu.Unlock()
	require.GreaterOrEqual(t, len(got), 3)
	require.Equal(t, []int{0, 1, 2}, got[:3], "the replies did not come back in the order the test needs")
	require.Equal(t, fences[0]+1, l.FencingToken(), "token %d: want 1 + node 0's fence %d, the largest counted (the last counted was node 2's, %d)",
		l.FencingToken(), fences[0], fences[2])

	// The token was committed where the key is ours: a majority's fences
	// are now the token.
	ks, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, l.FencingToken(), ks.MaxFence)
	require.NoError(t, l.Release(ctx))
}
