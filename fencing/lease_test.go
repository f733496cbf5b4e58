package fencing_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/fencing"
	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock"
)

// The two scenarios of the published fencing argument, with tokens minted
// by real leases on five real redis-server nodes. The "pause" is the lease
// running out while its holder is not looking: deterministic, no sleeping
// process needed (the chaos suite does it with SIGSTOP).

func leaseClient(t *testing.T) *redlock.Client {
	t.Helper()
	nodes := testenv.RedisNodes(t, 5)
	c, err := redlock.New(testenv.Clients(t, nodes), redlock.WithFencing(), redlock.WithMaxTTL(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// expire waits until l's validity has ended.
func expire(t *testing.T, l *redlock.Lease) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease did not end")
	}
}

func TestRealLeasePausedHolderIsRefused(t *testing.T) {
	c := leaseClient(t)
	pool := newPool(t)
	setupCounter(t, pool)
	g := guardCounter(t, pool)
	ctx := context.Background()
	key := testenv.Key(t)

	a, err := c.Lock(ctx, key, 150*time.Millisecond)
	require.NoError(t, err)
	n, hist, err := loadCounter(ctx, pool) // A reads, then stalls past its lease
	require.NoError(t, err)
	expire(t, a)

	// B's lease outlives its write and release on a loaded machine (A's is
	// the one that must run out).
	b, err := c.Lock(ctx, key, time.Second)
	require.NoError(t, err)
	require.Greater(t, b.FencingToken(), a.FencingToken())
	bn, bhist, err := loadCounter(ctx, pool)
	require.NoError(t, err)
	require.NoError(t, g.Write(ctx, pool, counterKey, b, increment(bn, bhist, holder(b.FencingToken()))))
	require.NoError(t, b.Release(ctx))

	// A wakes up and writes what it computed before the pause.
	err = g.Write(ctx, pool, counterKey, a, increment(n, hist, holder(a.FencingToken())))
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	n, hist, err = loadCounter(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, []int64{int64(b.FencingToken())}, hist)
}

// In the overlapping scenario A reads before B's lease exists and writes
// after B read: write-only fencing accepts both writes (tokens arrive in
// order) and loses A's update; claim-first and the fence table refuse A,
// which retries under a new lease and loses nothing.
func TestRealLeaseOverlappingHolders(t *testing.T) {
	c := leaseClient(t)
	ctx := context.Background()

	t.Run("write-only loses an update", func(t *testing.T) {
		pool := newPool(t)
		setupCounter(t, pool)
		g := guardCounter(t, pool)
		key := testenv.Key(t)
		a, err := c.Lock(ctx, key, 150*time.Millisecond)
		require.NoError(t, err)
		an, ahist, err := loadCounter(ctx, pool)
		require.NoError(t, err)
		expire(t, a)
		b, err := c.Lock(ctx, key, 150*time.Millisecond)
		require.NoError(t, err)
		bn, bhist, err := loadCounter(ctx, pool)
		require.NoError(t, err)
		// A's late write lands before B's: its token is still the newest.
		require.NoError(t, g.Write(ctx, pool, counterKey, a, increment(an, ahist, holder(a.FencingToken()))))
		require.NoError(t, g.Write(ctx, pool, counterKey, b, increment(bn, bhist, holder(b.FencingToken()))))
		n, _, err := loadCounter(ctx, pool)
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "two accepted increments, one lost")
	})

	t.Run("claim-first loses none", func(t *testing.T) {
		pool := newPool(t)
		setupCounter(t, pool)
		g := guardCounter(t, pool)
		key := testenv.Key(t)
		a, err := c.Lock(ctx, key, 150*time.Millisecond)
		require.NoError(t, err)
		require.NoError(t, g.Claim(ctx, pool, counterKey, a))
		an, ahist, err := loadCounter(ctx, pool)
		require.NoError(t, err)
		expire(t, a)
		b, err := c.Lock(ctx, key, time.Second) // outlives its release on a loaded machine
		require.NoError(t, err)
		require.NoError(t, g.Claim(ctx, pool, counterKey, b))
		bn, bhist, err := loadCounter(ctx, pool)
		require.NoError(t, err)
		err = g.WriteClaimed(ctx, pool, counterKey, a, increment(an, ahist, holder(a.FencingToken())))
		require.ErrorIs(t, err, fencing.ErrStaleToken)
		require.NoError(t, g.WriteClaimed(ctx, pool, counterKey, b, increment(bn, bhist, holder(b.FencingToken()))))
		require.NoError(t, b.Release(ctx))
		// A retries with a fresh lease.
		a2, err := c.Lock(ctx, key, 150*time.Millisecond)
		require.NoError(t, err)
		require.NoError(t, claimFirstIncrement(ctx, g, pool, holder(a2.FencingToken())))
		n, _, err := loadCounter(ctx, pool)
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
	})

	t.Run("fence table loses none", func(t *testing.T) {
		pool := newPool(t)
		setupCounter(t, pool)
		ft, err := fencing.NewFenceTable(fencing.FenceTableConfig{Table: fencing.DefaultFenceTable})
		require.NoError(t, err)
		require.NoError(t, ft.Setup(ctx, pool))
		key := testenv.Key(t)
		a, err := c.Lock(ctx, key, 150*time.Millisecond)
		require.NoError(t, err)
		expire(t, a)
		b, err := c.Lock(ctx, key, 150*time.Millisecond)
		require.NoError(t, err)
		require.NoError(t, ft.InTx(ctx, pool, "counter", b, func(ctx context.Context, tx pgx.Tx) error {
			return incrementTx(ctx, tx, holder(b.FencingToken()))
		}))
		ran := false
		err = ft.InTx(ctx, pool, "counter", a, func(ctx context.Context, tx pgx.Tx) error {
			ran = true
			return incrementTx(ctx, tx, holder(a.FencingToken()))
		})
		require.ErrorIs(t, err, fencing.ErrStaleToken)
		require.False(t, ran, "the stale holder's work ran")
		n, _, err := loadCounter(ctx, pool)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
	})
}
