package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// A lease is not reentrant: a second Lock of the key by the Client that
// holds it, from the same goroutine or another, waits for that lease like
// anyone else's Lock, and TryLock finds the key held. The lease, not the
// Client or the goroutine, is the holder (docs/design.md, "Not
// reentrant").
func TestLock_IsNotReentrant(t *testing.T) {
	c, _ := newCluster(t, 3).ready(t)
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.Lock(ctx, key, 5*time.Second)
	require.NoError(t, err)

	_, err = c.TryLock(ctx, key, 5*time.Second)
	require.True(t, IsHeld(err), "TryLock of a key this Client holds: %v, want held", err)

	start := time.Now()
	_, err = c.Lock(ctx, key, 5*time.Second, WaitAtMost(300*time.Millisecond))
	require.True(t, IsHeld(err), "Lock of a key this Client holds: %v, want held once its wait ends", err)
	require.True(t, errors.Is(err, ErrNotObtained))
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "the second Lock did not wait")

	require.NoError(t, l.Release(ctx))
	l2, err := c.Lock(ctx, key, 5*time.Second, WaitAtMost(5*time.Second))
	require.NoError(t, err, "Lock once the first lease was released")
	require.NoError(t, l2.Release(ctx))
}
