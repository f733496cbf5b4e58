package redlock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// From a red-team review: a lease handed over inside a release counts
// from before the call's first attempt, so a call that waited most of its
// ttl gets a lease with little validity left. Do used to schedule its
// first renewal one ttl/3 after it got the lease, whatever the lease's
// deadline: here the lease had about 0.56 s left and the first renewal
// was due 1 s later, so fn's ctx ended and Do returned ErrNotHeld while
// every node still held the key. The renewer must renew by the remaining
// validity.
func TestDo_RenewsAHandedLeaseBeforeItsValidityRunsOut(t *testing.T) {
	nodes := testenv.RedisNodes(t, 5)
	ucs := testenv.Clients(t, nodes)
	ctx := context.Background()
	h := wakeClient(t, ucs, WithKeyHandOff())
	w := wakeClient(t, ucs, slowRetry, WithKeyHandOff())
	require.NoError(t, h.Bootstrap(ctx))
	key := testenv.Key(t)
	const ttl = 3 * time.Second
	lh, err := h.TryLock(ctx, key, ttl)
	require.NoError(t, err)

	start := time.Now()
	handed := make(chan *Lease, 1)
	done := make(chan error, 1)
	go func() {
		done <- w.Do(ctx, key, ttl, func(fctx context.Context, l *Lease) error {
			handed <- l
			// Hold well past the handed lease's first deadline.
			select {
			case <-fctx.Done():
				return context.Cause(fctx)
			case <-time.After(1500 * time.Millisecond):
				return nil
			}
		})
	}()
	requireLineLen(t, ucs, key, 1, "the waiter never joined the line")
	time.Sleep(time.Until(start.Add(2400 * time.Millisecond)))
	require.NoError(t, lh.Release(ctx))

	var l *Lease
	select {
	case l = <-handed:
	case err := <-done:
		t.Fatalf("Do returned before fn ran: %v", err)
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter never got the key")
	}
	require.True(t, strings.Contains(l.value, "~"), "the waiter took the key with an attempt, not by hand-off")
	left := time.Until(l.Deadline())
	t.Logf("the handed lease had %v of validity left", left)
	require.Less(t, left, ttl/3, "the scenario needs a handed lease with less than ttl/3 left")

	select {
	case err := <-done:
		require.NoError(t, err, "Do lost a healthy handed lease")
	case <-time.After(5 * time.Second):
		t.Fatal("Do did not return")
	}
}
